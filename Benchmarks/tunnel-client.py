#!/usr/bin/env python3
"""HTTPS requests through an HTTP proxy's CONNECT tunnels (tls-upstream.sh's tunnel and
intercept targets; wrk cannot send CONNECT).

Each of --clients processes opens one CONNECT tunnel to --target through --proxy, completes a
TLS handshake inside it (verified against --cafile, with the target's host as the name to
check), then sends requests on it, kept alive, until --duration seconds are over: GET / or
POST /echo with the bytes of --body. A tunnel that breaks is opened again and counted. Prints
one line:

    requests=N errors=E tunnels=T seconds=S rps=R p50_us=X p99_us=Y

errors counts non-2xx answers and failed exchanges. Standard library only.

--check instead makes one tunnel, asks GET / (200 with 1024 bytes) and POST /echo (201), and
exits 0 if both hold. When the handshake fails verification against --cafile but succeeds
against --other-ca, it exits 3: the certificate that came back through the tunnel was not the
one this target should show (the caller says what that means); any other failure exits 1. The
reason is one line on stderr.
"""

import argparse
import http.client
import multiprocessing
import ssl
import sys
import threading
import time


def host_port(text):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def open_tunnel(args, cafile):
    """A kept-alive HTTPS connection through one CONNECT tunnel, handshake done."""
    ctx = ssl.create_default_context(cafile=cafile)
    conn = http.client.HTTPSConnection(*args.proxy, context=ctx, timeout=args.timeout)
    conn.set_tunnel(*args.target)
    conn.connect()
    return conn


def exchange(conn, args, method, body):
    """One request on the connection; returns (status, response body)."""
    headers = {"Host": "%s:%d" % args.target}
    if method == "POST":
        headers["Content-Type"] = "application/json"
        conn.request("POST", "/echo", body=body, headers=headers)
    else:
        conn.request("GET", "/", headers=headers)
    resp = conn.getresponse()
    return resp.status, resp.read()


def check(args, body):
    try:
        conn = open_tunnel(args, args.cafile)
    except ssl.SSLCertVerificationError as e:
        if args.other_ca:
            try:
                open_tunnel(args, args.other_ca).close()
            except (OSError, ssl.SSLError):
                pass
            else:
                print(f"the certificate inside the tunnel verifies against {args.other_ca}, "
                      f"not {args.cafile}", file=sys.stderr)
                return 3
        print(f"TLS inside the tunnel: {e.verify_message or e}", file=sys.stderr)
        return 1
    except (OSError, ssl.SSLError, http.client.HTTPException) as e:
        # http.client reports a refused CONNECT as OSError("Tunnel connection failed: 403 ...").
        print(f"CONNECT {args.target[0]}:{args.target[1]} via {args.proxy[0]}:{args.proxy[1]}: {e}",
              file=sys.stderr)
        return 1
    try:
        status, data = exchange(conn, args, "GET", body)
        if status != 200 or len(data) != 1024:
            print(f"GET / through the tunnel gave {status}/{len(data)} bytes, want 200/1024", file=sys.stderr)
            return 1
        status, _ = exchange(conn, args, "POST", body)
        if status != 201:
            print(f"POST /echo through the tunnel gave {status}, want 201", file=sys.stderr)
            return 1
    except (OSError, ssl.SSLError, http.client.HTTPException) as e:
        print(f"request through the tunnel failed: {e}", file=sys.stderr)
        return 1
    finally:
        conn.close()
    return 0


def worker(args, body, barrier, results):
    requests = errors = tunnels = 0
    latencies = []
    conn = None
    try:
        conn = open_tunnel(args, args.cafile)
        tunnels = 1
    except (OSError, ssl.SSLError, http.client.HTTPException):
        errors += 1
    try:
        barrier.wait(timeout=args.timeout + 30)
    except threading.BrokenBarrierError:
        pass  # a sibling died before its start: measure the ones that are here
    start = time.monotonic()
    deadline = start + args.duration
    while time.monotonic() < deadline:
        if conn is None:
            try:
                conn = open_tunnel(args, args.cafile)
                tunnels += 1
            except (OSError, ssl.SSLError, http.client.HTTPException):
                errors += 1
                time.sleep(0.05)  # the proxy refuses tunnels: do not spin on it
                continue
        t0 = time.perf_counter_ns()
        try:
            status, _ = exchange(conn, args, args.method, body)
        except (OSError, ssl.SSLError, http.client.HTTPException):
            errors += 1
            conn.close()
            conn = None
            continue
        latencies.append(time.perf_counter_ns() - t0)
        requests += 1
        if not 200 <= status < 300:
            errors += 1
        if conn.sock is None:  # the response closed the connection: the next request needs a new tunnel
            conn = None
    if conn is not None:
        conn.close()
    results.put((requests, errors, tunnels, time.monotonic() - start, latencies))


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--proxy", type=host_port, required=True, help="HOST:PORT of the HTTP proxy")
    ap.add_argument("--target", type=host_port, required=True, help="HOST:PORT to CONNECT to")
    ap.add_argument("--cafile", required=True, help="PEM CA that must sign the certificate seen in the tunnel")
    ap.add_argument("--other-ca", help="with --check: the CA whose certificate would mean the wrong party answered")
    ap.add_argument("--body", required=True, help="file whose bytes are the POST body")
    ap.add_argument("--method", choices=["GET", "POST"], default="GET")
    ap.add_argument("--clients", type=int, default=4, help="processes, one tunnel each")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of requests")
    ap.add_argument("--timeout", type=float, default=5.0, help="socket timeout in seconds")
    ap.add_argument("--check", action="store_true", help="one tunnel, GET and POST, then exit")
    args = ap.parse_args()
    with open(args.body, "rb") as f:
        body = f.read()
    if args.check:
        return check(args, body)
    if args.clients < 1:
        ap.error(f"--clients: expected at least 1, got {args.clients}")

    mp = multiprocessing.get_context("fork")
    barrier = mp.Barrier(args.clients)
    results = mp.Queue()
    procs = [mp.Process(target=worker, args=(args, body, barrier, results)) for _ in range(args.clients)]
    for p in procs:
        p.start()
    # Collected before join: a child blocks on exit until the queue's pipe is drained.
    rows = [results.get(timeout=args.duration + 60) for _ in procs]
    for p in procs:
        p.join()
    requests = sum(r[0] for r in rows)
    errors = sum(r[1] for r in rows)
    tunnels = sum(r[2] for r in rows)
    seconds = max(r[3] for r in rows)
    lat = sorted(x for r in rows for x in r[4])
    print("requests=%d errors=%d tunnels=%d seconds=%.3f rps=%.1f p50_us=%.1f p99_us=%.1f" % (
        requests, errors, tunnels, seconds, requests / seconds if seconds > 0 else 0.0,
        percentile(lat, 0.50) / 1000, percentile(lat, 0.99) / 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())

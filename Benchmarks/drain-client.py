#!/usr/bin/env python3
"""Queues N POSTs through Outbox while it is switched offline, then lets it drain into the slow
upstream and measures how long delivery takes: the drain benchmark's client (stdlib only).

Each request carries `X-Seq: i` (its rank within its key, which the upstream checks for order)
and, with --keys K > 0, `Outbox-Ordering-Key: k<i mod K>` and the same in `X-Key` (Outbox removes
its control headers before sending upstream). Prints one line of JSON: operations,
keys, seconds from switching back to `auto` until nothing is pending or in progress, ops/s,
and the upstream's /__stats.
"""
import argparse
import http.client
import json
import socket
import sys
import time


def connect(host, port):
    """A keep-alive connection without Nagle (http.client sends head and body separately)."""
    connection = http.client.HTTPConnection(host, port, timeout=30)
    connection.connect()
    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


def request(connection, method, path, body=None, headers=None):
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    data = response.read()
    return response.status, data


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outbox", required=True, help="HOST:PORT of Outbox")
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the slow upstream")
    parser.add_argument("--operations", type=int, default=2000)
    parser.add_argument("--keys", type=int, default=16, help="0: no Outbox-Ordering-Key")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()

    host, port = args.outbox.rsplit(":", 1)
    proxy = connect(host, int(port))
    admin = connect(host, int(port))
    json_headers = {"Content-Type": "application/json"}
    status, body = request(admin, "PUT", "/admin/connectivity", b'{"mode":"offline"}', json_headers)
    if status != 200:
        print("PUT /admin/connectivity offline answered %d: %s" % (status, body[:200]), file=sys.stderr)
        return 1

    payload = b'{"item":"' + b"x" * 200 + b'"}'
    ranks = {}
    for i in range(args.operations):
        key = "k%d" % (i % args.keys) if args.keys > 0 else None
        ranks[key] = ranks.get(key, -1) + 1
        headers = {"Content-Type": "application/json", "X-Seq": str(ranks[key])}
        if key is not None:
            headers["Outbox-Ordering-Key"] = key
            # Outbox removes its control headers before sending upstream: the key travels
            # again in a plain header, for the upstream to check the order per key.
            headers["X-Key"] = key
        status, body = request(proxy, "POST", "/items", payload, headers)
        if status != 202:
            print("POST %d answered %d (want 202): %s" % (i, status, body[:200]), file=sys.stderr)
            return 1

    start = time.monotonic()
    status, body = request(admin, "PUT", "/admin/connectivity", b'{"mode":"auto"}', json_headers)
    if status != 200:
        print("PUT /admin/connectivity auto answered %d: %s" % (status, body[:200]), file=sys.stderr)
        return 1
    while True:
        status, body = request(admin, "GET", "/admin/status")
        counts = json.loads(body)["counts"]
        if counts["pending"] + counts["inProgress"] == 0:
            break
        if time.monotonic() - start > args.timeout:
            print("not drained within %.0f s: %s" % (args.timeout, counts), file=sys.stderr)
            return 1
        time.sleep(0.02)
    elapsed = time.monotonic() - start

    uhost, uport = args.upstream.rsplit(":", 1)
    upstream = connect(uhost, int(uport))
    _, stats = request(upstream, "GET", "/__stats")
    print(json.dumps({"operations": args.operations, "keys": args.keys, "seconds": round(elapsed, 3),
                      "opsPerSecond": round(args.operations / elapsed, 1), "completed": counts["completed"],
                      "failed": counts["failed"], "upstream": json.loads(stats)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

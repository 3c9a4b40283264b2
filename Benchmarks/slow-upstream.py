#!/usr/bin/env python3
"""An HTTP/1.1 upstream on 127.0.0.1 that answers every request after DELAY milliseconds, for
the drain benchmark: a real API's round trip, stood in for on loopback.

It answers `201 {"ok":true}` to everything except `GET /__stats`, which answers JSON with what
the benchmark asserts on: `requests` (answered so far), `maxConcurrent` (most requests it held
at once), `keyOverlaps` (times a request arrived while another one with the same `X-Key` (the
client's `Outbox-Ordering-Key`, which Outbox does not forward) was still being answered: the ordering promise broken), `unkeyedOverlaps`
(the same for requests without a key, which share one lane), and `outOfOrder` (requests whose
`X-Seq` header was lower than the last one seen for their key: delivered out of order).

Threads, one per connection (the proxy keeps a few open), stdlib only. Prints `listening PORT`.
"""
import argparse
import http.server
import json
import socket
import socketserver
import sys
import threading
import time


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.current = 0
        self.max_concurrent = 0
        self.in_flight = {}  # ordering key (or None) -> requests being answered
        self.key_overlaps = 0
        self.unkeyed_overlaps = 0
        self.last_seq = {}
        self.out_of_order = 0

    def begin(self, key, seq):
        with self.lock:
            self.current += 1
            self.max_concurrent = max(self.max_concurrent, self.current)
            if self.in_flight.get(key, 0) > 0:
                if key is None:
                    self.unkeyed_overlaps += 1
                else:
                    self.key_overlaps += 1
            self.in_flight[key] = self.in_flight.get(key, 0) + 1
            if seq is not None:
                if seq < self.last_seq.get(key, -1):
                    self.out_of_order += 1
                self.last_seq[key] = max(seq, self.last_seq.get(key, -1))

    def end(self, key):
        with self.lock:
            self.current -= 1
            self.in_flight[key] -= 1
            self.requests += 1

    def document(self):
        with self.lock:
            return {"requests": self.requests, "maxConcurrent": self.max_concurrent,
                    "keyOverlaps": self.key_overlaps, "unkeyedOverlaps": self.unkeyed_overlaps,
                    "outOfOrder": self.out_of_order}


STATS = Stats()
DELAY = 0.005


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # One write per response and no Nagle: otherwise delayed ACKs add up to 40 ms a request
        # and the benchmark measures the kernel's timers instead of the proxy.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        head = "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
            status, "OK" if status == 200 else "Created", len(body))
        self.wfile.write(head.encode() + body)

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path == "/__stats":
            self.answer(200, json.dumps(STATS.document()).encode())
            return
        key = self.headers.get("X-Key")
        seq = self.headers.get("X-Seq")
        STATS.begin(key, int(seq) if seq and seq.isdigit() else None)
        try:
            time.sleep(DELAY)
        finally:
            STATS.end(key)
        self.answer(201, b'{"ok":true}')

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


def main():
    global DELAY
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay-ms", type=float, default=5.0)
    args = parser.parse_args()
    DELAY = args.delay_ms / 1000
    server = Server(("127.0.0.1", args.port), Handler)
    print("listening %d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

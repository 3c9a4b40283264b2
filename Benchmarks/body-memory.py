#!/usr/bin/env python3
"""The two ends of Benchmarks/body-memory.sh, standard library only, loopback only.

`upstream PORT_FILE RATE`: an HTTP/1.1 origin on 127.0.0.1:0 (its port written to PORT_FILE).
A request without `Outbox-Attempt` (a direct forward) has its body read slowly, RATE bytes a
second on its connection, and is then answered `503` (an unavailable status: Outbox stores the
write); so every upload is held by Outbox for as long as its body takes to trickle in. A request
with `Outbox-Attempt` (a replay) is read at full speed, answered `201`, and the SHA-256 of its
body recorded under its `Idempotency-Key`. `GET /__stats` answers those digests as JSON.

`client PORT COUNT SIZE`: COUNT concurrent POSTs of SIZE random bytes to 127.0.0.1:PORT, each
with `Idempotency-Key: bm-N`; prints one JSON object: the statuses seen and the SHA-256 sent
under each key.
"""
import hashlib
import json
import os
import socket
import socketserver
import sys
import threading
import time


def read_head(stream):
    """The request line and header fields, or None at EOF."""
    lines = []
    while True:
        line = stream.readline(65536)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line.decode("latin-1").rstrip("\r\n"))


class Upstream(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, rate):
        self.rate = rate
        self.lock = threading.Lock()
        self.digests = {}
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        while True:
            head = read_head(self.rfile)
            if not head:
                return
            method, target = head[0].split(" ")[0:2]
            fields = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
            length = int(fields.get("content-length", "0"))
            replay = "outbox-attempt" in fields
            digest = hashlib.sha256()
            left = length
            while left > 0:
                piece = self.rfile.read(min(left, 65536))
                if not piece:
                    return
                digest.update(piece)
                left -= len(piece)
                if not replay:
                    time.sleep(len(piece) / self.server.rate)
            if method == "GET" and target == "/__stats":
                with self.server.lock:
                    body = json.dumps(self.server.digests).encode()
                self.answer(200, body)
            elif replay:
                with self.server.lock:
                    self.server.digests[fields.get("idempotency-key", "")] = digest.hexdigest()
                self.answer(201, b'{"ok":true}')
            else:
                self.answer(503, b'{"slow":true}')

    def answer(self, status, body):
        reason = {200: "OK", 201: "Created", 503: "Service Unavailable"}[status]
        self.wfile.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (status, reason.encode(), len(body), body))
        self.wfile.flush()


def upstream(port_file, rate):
    server = Upstream(float(rate))
    with open(port_file + ".tmp", "w") as out:
        out.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


def upload(port, index, size, results):
    body = os.urandom(size)
    key = "bm-%d" % index
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=600) as connection:
            connection.sendall(("POST /upload/%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nIdempotency-Key: %s\r\n"
                                "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n"
                                % (index, port, key, size)).encode())
            connection.sendall(body)
            stream = connection.makefile("rb")
            status_line = stream.readline().decode("latin-1")
            status = int(status_line.split(" ")[1])
            head = read_head(stream) or []
            length = 0
            for line in head:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            stream.read(length)
    except (OSError, ValueError, IndexError) as error:
        status = "error: %s" % error
    results[key] = {"status": status, "sha256": hashlib.sha256(body).hexdigest()}


def client(port, count, size):
    results = {}
    threads = [threading.Thread(target=upload, args=(int(port), index, int(size), results)) for index in range(int(count))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps(results))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "upstream":
        upstream(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "client":
        client(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)

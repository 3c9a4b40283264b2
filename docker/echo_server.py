#!/usr/bin/env python3
"""Sample upstream for docker/compose.yaml: answers every request with a JSON echo.

    GET  /anything         -> 200 {"method", "path", "headers", "body", "receivedAt"}
    POST /v1/items         -> 201 with the same echo (any POST/PUT/PATCH answers 201)
    any  /status/NNN       -> status NNN with the echo (try /status/503 to see outbox
                              queue a write, /status/409 for a conflict)

Standard library only; HTTP/1.1 keep-alive; reads Content-Length and chunked request
bodies. Listens on 0.0.0.0:$PORT (default 9000) inside its container.
"""

import json
import os
import signal
import sys
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 16 * 1024 * 1024


class EchoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response has a Content-Length
    server_version = "echo/1"

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks, total = [], 0
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailer fields: ignored
                    return b"".join(chunks)
                total += size
                if total > MAX_BODY:
                    raise ValueError("body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline()  # CRLF after the chunk data
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(length) if length > 0 else b""

    def respond(self):
        try:
            body = self.read_body()
        except ValueError as error:
            self.send_error(400, str(error))
            return
        status = 201 if self.command in ("POST", "PUT", "PATCH") else 200
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        if len(parts) == 2 and parts[0] == "status" and parts[1].isdigit():
            status = int(parts[1])
        echo = {
            "method": self.command,
            "path": self.path,
            "headers": [[name, value] for name, value in self.headers.items()],
            "body": body.decode("utf-8", errors="replace"),
            "receivedAt": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        }
        payload = (json.dumps(echo, indent=2) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = respond

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


def main():
    port = int(os.environ.get("PORT", "9000"))
    host = os.environ.get("HOST", "0.0.0.0")
    server = ThreadingHTTPServer((host, port), EchoHandler)
    server.daemon_threads = True
    # As PID 1 in a container, SIGTERM is ignored unless handled: `docker stop` would
    # wait for its timeout and then kill.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("echo server listening on http://%s:%d" % (host, port), file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()

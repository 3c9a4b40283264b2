#!/usr/bin/env python3
"""A small HTTPS HTTP/1.1 origin on 127.0.0.1 for the https:// upstream tests (stdlib only).

It binds 127.0.0.1:0 and prints `listening PORT` on stdout once it accepts connections, then
`request METHOD PATH` for every request it receives (so a test can tell that a request never
reached it). Routes:

    GET  /hello       200 "secure hello"
    POST /echo        201, body: "METHOD PATH\n", one "name: value" line per received header,
                      an empty line, then the received body
    GET  /redirect    302 with "Location: /hello"
    GET  /set-cookie  200 with "Set-Cookie: s=1"
    GET  /cookie      200, body: the request's Cookie header, or "none" without one
    GET  /big         200, 2 MiB (BIG_BODY_BYTES) with Content-Length: SplitMix64 seeded with
                      BIG_BODY_SEED, each 64-bit output little-endian (the integration tests'
                      GeneratedBody produces the same bytes)
    anything else     404

The certificate defaults to Tests/Fixtures/tls/server.pem (signed by the test CA); --cert and
--key choose another one, e.g. the untrusted fixture.
"""
import argparse
import http.server
import os
import socketserver
import ssl
import struct
import sys

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Fixtures", "tls")
BIG_BODY_BYTES = 2 * 1024 * 1024
BIG_BODY_SEED = 0x5EC0_DE0F_B16B_0D1E
MASK64 = (1 << 64) - 1


def splitmix64_bytes(count: int, seed: int) -> bytes:
    """`count` bytes of SplitMix64 (Steele, Lea, Flood 2014) output, little-endian words."""
    state = seed & MASK64
    words = []
    for _ in range((count + 7) // 8):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        mixed = state
        mixed = ((mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        mixed = ((mixed ^ (mixed >> 27)) * 0x94D049BB133111EB) & MASK64
        mixed ^= mixed >> 31
        words.append(mixed)
    return struct.pack("<%dQ" % len(words), *words)[:count]


_big_body = None


def big_body() -> bytes:
    # Made on first use (about half a second of pure Python), not at every start-up. Two
    # threads racing here both compute the same bytes: harmless.
    global _big_body
    if _big_body is None:
        _big_body = splitmix64_bytes(BIG_BODY_BYTES, BIG_BODY_SEED)
    return _big_body


def announce(line: str) -> None:
    # One write per line and a flush: the test reads stdout while we run.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def version_string(self) -> str:
        return "tls-upstream"

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        sys.stderr.write("tls_upstream: %s\n" % (format % args))

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = bytearray()
            while True:
                size_line = self.rfile.readline(1024)
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    # Trailer section up to the empty line.
                    while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline(8)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def reply(self, status: int, body: bytes, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def route(self) -> None:
        announce("request %s %s" % (self.command, self.path))
        body = self.read_body()
        text = [("Content-Type", "text/plain; charset=utf-8")]
        if self.command == "GET" and self.path == "/hello":
            self.reply(200, b"secure hello", text)
        elif self.command == "POST" and self.path == "/echo":
            lines = ["%s %s" % (self.command, self.path)]
            lines += ["%s: %s" % (name, value) for name, value in self.headers.items()]
            echoed = ("\n".join(lines) + "\n\n").encode("utf-8") + body
            self.reply(201, echoed, [("Content-Type", "application/octet-stream")])
        elif self.command == "GET" and self.path == "/redirect":
            self.reply(302, b"see /hello", text + [("Location", "/hello")])
        elif self.command == "GET" and self.path == "/set-cookie":
            self.reply(200, b"cookie set", text + [("Set-Cookie", "s=1")])
        elif self.command == "GET" and self.path == "/cookie":
            cookie = self.headers.get("Cookie")
            self.reply(200, (cookie if cookie is not None else "none").encode("utf-8"), text)
        elif self.command == "GET" and self.path == "/big":
            self.reply(200, big_body(), [("Content-Type", "application/octet-stream")])
        else:
            self.reply(404, b"no such route", text)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = route


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self, context: ssl.SSLContext):
        super().__init__(("127.0.0.1", 0), Handler)
        # The handshake runs in the handler's thread on its first read, so a client that
        # rejects our certificate costs only that connection, never the accept loop.
        self.socket = context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    def handle_error(self, request, client_address):
        sys.stderr.write("tls_upstream: connection from %s ended: %s\n" % (client_address, sys.exc_info()[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cert", default=os.path.join(FIXTURES, "server.pem"))
    parser.add_argument("--key", default=os.path.join(FIXTURES, "server-key.pem"))
    args = parser.parse_args()

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server = Server(context)
    announce("listening %d" % server.server_address[1])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

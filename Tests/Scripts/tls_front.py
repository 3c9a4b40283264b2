#!/usr/bin/env python3
"""A TLS front for the https:// upstream tests (stdlib only): TLS on 127.0.0.1, plain TCP to a
backend (the integration tests' scriptable TestUpstream), bytes relayed both ways unchanged.

It binds 127.0.0.1:0 and prints, one line each, flushed at once (the test reads stdout while
the front runs):

    listening PORT                        once it accepts connections
    accepted N                            per TCP connection (N counts from 1)
    connection N alpn=PROTO sni=NAME resumed=yes|no
                                          per completed handshake (`-` for none; resumed: the
                                          client resumed an earlier session)
    handshake-failed N REASON             per failed handshake (OpenSSL's reason, or eof/timeout)
    certificate PATH                      after SIGUSR1 switched to the next --cert/--key pair
                                          and closed the established connections

Options:
    --cert FILE --key FILE   the certificate chain and key to present; repeat the pair to have
                             SIGUSR1 switch to the next one (cyclically) and close every
                             established connection, as an origin restarting with a new
                             certificate would: a test can make a trusted origin untrusted and
                             back without changing its port, and no pooled connection made
                             with the old certificate lingers
    --client-ca FILE         require a client certificate signed by a CA in FILE (mTLS)
    --tls12-ciphers LIST     speak TLS 1.2 at most, offering only the suites of LIST (an OpenSSL
                             cipher list, e.g. AES128-SHA): an origin of an older configuration
    --backend HOST:PORT      where to relay the decrypted bytes (one backend connection per
                             TLS connection, opened after the handshake)
    --silent                 accept TCP connections and never answer the handshake
    --ipv6-loopback          also listen on [::1] at the same port (when the system has IPv6
                             loopback and the port is free there): a client that resolves
                             `localhost` to ::1 first then reaches the front as well

The server offers ALPN `h2` and `http/1.1`, preferring h2: `alpn=http/1.1` in a connection line
therefore means the client did not offer h2, and `alpn=-` that it offered no ALPN at all.
"""
import argparse
import os
import select
import signal
import socket
import ssl
import sys
import threading

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Fixtures", "tls")
HANDSHAKE_TIMEOUT = 30.0
# Bytes read ahead in one direction before the front stops reading that side: the relay
# keeps backpressure, so a 64 MiB download never sits in this process either.
BUFFER_LIMIT = 1 << 20
# One TLS record's worth: a nonblocking SSL write that wants to be retried must be retried with
# the same bytes, so writes go out in fixed pieces.
WRITE_PIECE = 16 * 1024

# Reentrant: the SIGUSR1 handler runs on the main thread, maybe while it holds the lock.
_print_lock = threading.RLock()


def announce(line: str) -> None:
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def one_line(text: str) -> str:
    return " ".join(str(text).split()) or "-"


def failure_reason(error: BaseException) -> str:
    if isinstance(error, ssl.SSLCertVerificationError) and error.verify_message:
        return "certificate verify failed: " + error.verify_message
    if isinstance(error, ssl.SSLEOFError) or isinstance(error, ssl.SSLZeroReturnError):
        return "eof"
    if isinstance(error, ssl.SSLError):
        return one_line(error.reason or error.strerror or error)
    if isinstance(error, socket.timeout):
        return "timeout"
    if isinstance(error, ConnectionResetError):
        return "reset"
    return one_line("%s: %s" % (type(error).__name__, error))


class Front:
    def __init__(self, args):
        self.pairs = list(zip(args.cert, args.key))
        self.client_ca = args.client_ca
        self.tls12_ciphers = args.tls12_ciphers
        self.backend = None
        if args.backend:
            host, _, port = args.backend.rpartition(":")
            self.backend = (host, int(port))
        self.silent = args.silent
        self.contexts = [self.make_context(cert, key) for cert, key in self.pairs]
        self.current = 0
        self.lock = threading.RLock()  # reentrant for the SIGUSR1 handler, as _print_lock
        self.count = 0
        self.established = {}  # number -> (tls, backend), while relaying
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.listeners = [self.listener]
        if args.ipv6_loopback and socket.has_ipv6:
            try:
                self.listeners.append(socket.create_server(
                    ("::1", self.listener.getsockname()[1]), family=socket.AF_INET6, backlog=128))
            except OSError:
                pass  # no IPv6 loopback here: 127.0.0.1 alone

    def make_context(self, cert: str, key: str) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert, key)
        context.set_alpn_protocols(["h2", "http/1.1"])
        if self.tls12_ciphers:
            context.maximum_version = ssl.TLSVersion.TLSv1_2
            context.set_ciphers(self.tls12_ciphers)
        context.sni_callback = self.remember_sni
        if self.client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.client_ca)
        return context

    @staticmethod
    def remember_sni(tls, server_name, context):
        tls.outbox_sni = server_name
        return None

    def switch(self, *_):
        with self.lock:
            self.current = (self.current + 1) % len(self.contexts)
            path = self.pairs[self.current][0]
            connections = list(self.established.values())
        for tls, backend in connections:
            # The plain socket's shutdown: SSLSocket.shutdown would drop the SSL object under
            # the relay thread. The relay sees the end and closes both sides itself.
            for sock in (tls, backend):
                try:
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass
        announce("certificate %s" % path)

    def serve(self) -> None:
        for extra in self.listeners[1:]:
            threading.Thread(target=self.accept_forever, args=(extra,), daemon=True).start()
        announce("listening %d" % self.listener.getsockname()[1])
        self.accept_forever(self.listener)

    def accept_forever(self, listener: socket.socket) -> None:
        while True:
            raw, _ = listener.accept()
            with self.lock:
                self.count += 1
                number = self.count
                context = self.contexts[self.current]
            announce("accepted %d" % number)
            target = self.hold_silently if self.silent else self.handle
            threading.Thread(target=target, args=(raw, number, context), daemon=True).start()

    @staticmethod
    def hold_silently(raw: socket.socket, number: int, context) -> None:
        # Reads the ClientHello and whatever follows, answers nothing, until the peer gives up.
        try:
            while raw.recv(65536):
                pass
        except OSError:
            pass
        finally:
            raw.close()

    def handle(self, raw: socket.socket, number: int, context: ssl.SSLContext) -> None:
        tls = None
        try:
            raw.settimeout(HANDSHAKE_TIMEOUT)
            tls = context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
            tls.do_handshake()
        except (OSError, ValueError) as error:
            announce("handshake-failed %d %s" % (number, failure_reason(error)))
            (tls or raw).close()
            return
        sni = getattr(tls, "outbox_sni", None)
        announce("connection %d alpn=%s sni=%s resumed=%s" % (number, tls.selected_alpn_protocol() or "-", sni or "-",
                                                               "yes" if tls.session_reused else "no"))
        try:
            backend = socket.create_connection(self.backend, timeout=10)
        except OSError as error:
            announce("backend-failed %d %s" % (number, failure_reason(error)))
            tls.close()
            return
        with self.lock:
            self.established[number] = (tls, backend)
        try:
            relay(tls, backend)
        except OSError as error:
            sys.stderr.write("tls_front: connection %d ended: %s\n" % (number, failure_reason(error)))
        finally:
            with self.lock:
                self.established.pop(number, None)
            close_tls(tls)
            backend.close()


def close_tls(tls: ssl.SSLSocket) -> None:
    # close_notify first, so the client can tell a complete close-delimited body from a cut one.
    try:
        tls.setblocking(False)
        tls.unwrap()
    except (OSError, ValueError):
        pass
    tls.close()


def relay(tls: ssl.SSLSocket, backend: socket.socket) -> None:
    """Copies bytes both ways until the backend is done (its EOF, after the client's). One
    thread, nonblocking sockets: an SSL object must not be read and written from two threads."""
    tls.setblocking(False)
    backend.setblocking(False)
    upward = bytearray()      # client -> backend
    downward = bytearray()    # backend -> client
    piece = None              # a TLS write to retry with the same bytes
    client_open = True        # still reading the client
    backend_open = True       # still reading the backend
    backend_write_shut = False
    tls_read_wants_write = False
    tls_write_wants_read = False
    while True:
        progressed = False
        if client_open and len(upward) < BUFFER_LIMIT:
            tls_read_wants_write = False
            try:
                data = tls.recv(65536)
                progressed = True
                if data:
                    upward += data
                else:
                    client_open = False
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLWantWriteError:
                tls_read_wants_write = True
            except (ssl.SSLEOFError, ConnectionResetError):
                client_open = False
                progressed = True
        if upward:
            try:
                sent = backend.send(upward)
                del upward[:sent]
                progressed = progressed or sent > 0
            except BlockingIOError:
                pass
        elif not client_open and not backend_write_shut:
            backend.shutdown(socket.SHUT_WR)
            backend_write_shut = True
        if backend_open and len(downward) < BUFFER_LIMIT:
            try:
                data = backend.recv(65536)
                progressed = True
                if data:
                    downward += data
                else:
                    backend_open = False
            except BlockingIOError:
                pass
            except ConnectionResetError:
                backend_open = False
                progressed = True
        if piece is None and downward:
            piece = bytes(downward[:WRITE_PIECE])
            del downward[:len(piece)]
        if piece is not None:
            tls_write_wants_read = False
            try:
                tls.send(piece)
                piece = None
                progressed = True
            except ssl.SSLWantWriteError:
                pass
            except ssl.SSLWantReadError:
                tls_write_wants_read = True
        if not backend_open and piece is None and not downward:
            return
        if progressed:
            continue
        readable, writable = [], []
        if (client_open and len(upward) < BUFFER_LIMIT and not tls_read_wants_write) or tls_write_wants_read:
            readable.append(tls)
        if backend_open and len(downward) < BUFFER_LIMIT:
            readable.append(backend)
        if upward:
            writable.append(backend)
        if piece is not None or tls_read_wants_write:
            writable.append(tls)
        select.select(readable, writable, [], 60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cert", action="append")
    parser.add_argument("--key", action="append")
    parser.add_argument("--client-ca")
    parser.add_argument("--tls12-ciphers")
    parser.add_argument("--backend")
    parser.add_argument("--silent", action="store_true")
    parser.add_argument("--ipv6-loopback", action="store_true")
    args = parser.parse_args()
    args.cert = args.cert or [os.path.join(FIXTURES, "server.pem")]
    args.key = args.key or [os.path.join(FIXTURES, "server-key.pem")]
    if len(args.cert) != len(args.key):
        parser.error("give --cert and --key in pairs (%d certificates, %d keys)" % (len(args.cert), len(args.key)))
    if not args.silent and not args.backend:
        parser.error("--backend HOST:PORT is required unless --silent")
    front = Front(args)
    signal.signal(signal.SIGUSR1, front.switch)
    try:
        front.serve()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

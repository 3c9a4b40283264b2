#!/usr/bin/env python3
"""The clients of admin-memory.sh, standard library only, loopback only.

  admin-memory-client.py fill PORT COUNT [CONNECTIONS] [DEPTH]
      POSTs small bodies to http://127.0.0.1:PORT/items until COUNT were answered 202, over
      CONNECTIONS keep-alive connections (64) with DEPTH requests pipelined on each (8), so that
      group commit takes many per sync. Prints the count stored and the rate.
  admin-memory-client.py views PORT ID VIEWERS
      VIEWERS threads GET /admin/operations/ID at the same moment and read the whole answer;
      prints each answer's status and length once, and the time the slowest took.
"""
import socket
import sys
import threading
import time


def read_response(sock, buffer):
    """Reads one small response framed by Content-Length; returns (status, the bytes after it)."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed before a response head")
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed inside a body")
        rest += chunk
    return status, rest[length:]


def fill(port, count, connections=64, depth=8):
    request = (b"POST /items HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
               b"Content-Length: 11\r\n\r\n{\"fill\":1}\n" % port)
    lock = threading.Lock()
    state = {"claimed": 0, "stored": 0, "other": 0}

    def writer():
        sock = socket.create_connection(("127.0.0.1", port))
        buffer = b""
        while True:
            with lock:
                take = min(depth, count - state["claimed"])
                state["claimed"] += max(take, 0)
            if take <= 0:
                break
            sock.sendall(request * take)
            for _ in range(take):
                status, buffer = read_response(sock, buffer)
                with lock:
                    state["stored" if status == 202 else "other"] += 1
        sock.close()

    started = time.monotonic()
    threads = [threading.Thread(target=writer) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    print("stored %d (other answers %d) in %.1f s: %.0f/s" % (state["stored"], state["other"], elapsed,
                                                            state["stored"] / elapsed))
    return 0 if state["other"] == 0 else 1


def views(port, operation, viewers):
    request = b"GET /admin/operations/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (operation.encode(), port)
    start = threading.Barrier(viewers)
    results = []
    lock = threading.Lock()

    def viewer():
        sock = socket.create_connection(("127.0.0.1", port))
        start.wait()
        began = time.monotonic()
        sock.sendall(request)
        # Read and count, keeping nothing: the client's memory is not what is measured.
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            buffer += sock.recv(65536)
        head, _, rest = buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        length = next(int(l.split(b":")[1]) for l in lines[1:] if l.lower().startswith(b"content-length:"))
        have = len(rest)
        while have < length:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            have += len(chunk)
        sock.close()
        with lock:
            results.append((status, have, time.monotonic() - began))

    threads = [threading.Thread(target=viewer) for _ in range(viewers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answers = sorted(set((status, size) for status, size, _ in results))
    print("%d views: answers (status, bytes) %s; slowest %.2f s" % (len(results), answers, max(t for _, _, t in results)))
    return 0 if all(status == 200 for status, _, _ in results) else 1


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "fill":
        sys.exit(fill(int(sys.argv[2]), int(sys.argv[3]), *(int(a) for a in sys.argv[4:6])))
    if command == "views":
        sys.exit(views(int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
    sys.exit(__doc__)

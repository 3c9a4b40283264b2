#!/usr/bin/env python3
"""Helpers for events.sh, stdlib only, loopback only (events.sh listens with curl).

  events-client.py listen PORT SECONDS    read GET /admin/events for SECONDS, print events/s
  events-client.py generate PORT RATE SECONDS
      send RATE writes/s with `Outbox-Mode: queue` to an origin that is down (127.0.0.1:9),
      so each one is stored and announced (and its retries announced again) while the
      forwarded traffic under test is untouched; prints the writes sent.
"""
import socket
import sys
import threading
import time


def listen(port, seconds):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"GET /admin/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
    sock.settimeout(0.5)
    events = 0
    tail = b""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        data = tail + chunk
        events += data.count(b"\nevent: ") + (1 if data.startswith(b"event: ") else 0)
        tail = data[-8:]
    print("%.0f" % (events / seconds))


def generate(port, rate, seconds, connections=8):
    """RATE writes/s over several connections: one connection waits for each 202 (a group
    commit away), which alone would cap the rate below what is asked."""
    threads = [threading.Thread(target=generate_one, args=(port, rate / connections, seconds, sent))
               for sent in [[0] for _ in range(connections)]]
    counts = [thread._args[3] for thread in threads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(sum(count[0] for count in counts))


def generate_one(port, rate, seconds, total):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(10)
    body = b'{"generated":true}'
    request = (b"POST http://127.0.0.1:9/events-load HTTP/1.1\r\nHost: 127.0.0.1:9\r\nOutbox-Mode: queue\r\n"
               b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s") % (len(body), body)
    start = time.monotonic()
    sent = 0
    buffered = b""

    def read_answer():
        nonlocal buffered
        while b"\r\n\r\n" not in buffered:
            buffered += sock.recv(65536)
        head, _, rest = buffered.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            rest += sock.recv(65536)
        buffered = rest[length:]

    while time.monotonic() - start < seconds:
        due = int((time.monotonic() - start) * rate)
        while sent < due:
            sock.sendall(request)
            read_answer()
            sent += 1
            total[0] = sent
        time.sleep(0.001)


if __name__ == "__main__":
    if sys.argv[1] == "listen":
        listen(int(sys.argv[2]), float(sys.argv[3]))
    else:
        generate(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))

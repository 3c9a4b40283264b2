#!/usr/bin/env bash
# Captures the first TLS record (the ClientHello) that real clients send, into the .bin files
# beside this script: run from this directory; rerun only to replace them all.
set -euo pipefail
cd "$(dirname "$0")"
# The server prints its port once it listens: read that line (bounded), rather than poll for it.
exec {SERVER}< <(python3 capture.py openssl.bin openssl-nosni.bin curl.bin python.bin node.bin)
SERVER_PID=$!
read -r -t 10 port <&"$SERVER" || { echo "capture.py printed no port within 10 s" >&2; exit 1; }
echo | timeout 5 openssl s_client -connect "127.0.0.1:$port" -servername api.example.com >/dev/null 2>&1 || true
echo | timeout 5 openssl s_client -connect "127.0.0.1:$port" -noservername >/dev/null 2>&1 || true
timeout 5 curl -s --resolve "shop.example.org:$port:127.0.0.1" "https://shop.example.org:$port/" >/dev/null 2>&1 || true
timeout 5 python3 -c "
import socket, ssl
try: ssl.create_default_context().wrap_socket(socket.create_connection(('127.0.0.1', $port)), server_hostname='Py.Example.NET')
except Exception: pass" || true
timeout 5 node -e "require('tls').connect({host: '127.0.0.1', port: $port, servername: 'node.example.com'}).on('error', () => {})" || true
wait "$SERVER_PID"
exec {SERVER}<&-

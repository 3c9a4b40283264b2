#!/usr/bin/env bash
# Captures the first TLS record (the ClientHello) that real clients send, into the .bin files
# beside this script: run from this directory; rerun only to replace them all.
set -euo pipefail
cd "$(dirname "$0")"
python3 capture.py openssl.bin openssl-nosni.bin curl.bin python.bin node.bin > .port &
while [[ ! -s .port ]]; do sleep 0.1; done
port=$(cat .port)
echo | timeout 5 openssl s_client -connect "127.0.0.1:$port" -servername api.example.com >/dev/null 2>&1 || true
echo | timeout 5 openssl s_client -connect "127.0.0.1:$port" -noservername >/dev/null 2>&1 || true
timeout 5 curl -s --resolve "shop.example.org:$port:127.0.0.1" "https://shop.example.org:$port/" >/dev/null 2>&1 || true
timeout 5 python3 -c "
import socket, ssl
try: ssl.create_default_context().wrap_socket(socket.create_connection(('127.0.0.1', $port)), server_hostname='Py.Example.NET')
except Exception: pass" || true
timeout 5 node -e "require('tls').connect({host: '127.0.0.1', port: $port, servername: 'node.example.com'}).on('error', () => {})" || true
wait
rm -f .port

#!/usr/bin/env python3
"""Send one request through an HTTP proxy with urllib's ProxyHandler and print the outcome.

The integration tests run this as a real-world client of the proxy: it prints one JSON object
{"status": int, "headers": [[name, value], ...], "bodyBase64": str} on stdout and exits 0,
even for HTTP error statuses; any other failure prints a message on stderr and exits 1.
"""
import argparse
import base64
import json
import sys
import urllib.error
import urllib.request


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--proxy", required=True, help="proxy URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--url", required=True, help="absolute URL of the origin")
    parser.add_argument("--method", default="GET")
    parser.add_argument("--data-file", help="file whose bytes are the request body")
    parser.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    parser.add_argument("--timeout", type=float, default=15.0)
    args = parser.parse_args()

    body = None
    if args.data_file is not None:
        with open(args.data_file, "rb") as handle:
            body = handle.read()
    request = urllib.request.Request(args.url, data=body, method=args.method)
    for header in args.header:
        name, _, value = header.partition(":")
        request.add_header(name.strip(), value.strip())
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": args.proxy}))
    try:
        with opener.open(request, timeout=args.timeout) as response:
            status, headers, payload = response.status, response.getheaders(), response.read()
    except urllib.error.HTTPError as error:
        status, headers, payload = error.code, list(error.headers.items()), error.read()
    except Exception as error:  # noqa: BLE001 - any failure is reported to the test as text
        print(f"urllib request failed: {error!r}", file=sys.stderr)
        return 1
    json.dump({
        "status": status,
        "headers": [[name, value] for name, value in headers],
        "bodyBase64": base64.b64encode(payload).decode("ascii"),
    }, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Send one request with Python `requests`, configured the way its users configure it: the
proxy from `HTTPS_PROXY` (or `HTTP_PROXY`) and the trusted CAs from `REQUESTS_CA_BUNDLE`,
both read by requests itself from the environment (nothing here passes them explicitly).

Prints one JSON object {"status": int, "headers": [[name, value], ...], "bodyBase64": str} on
stdout and exits 0, even for HTTP error statuses; any other failure (a certificate requests
refuses, a refused connection) prints one line on stderr and exits 1.
"""
import argparse
import base64
import json
import sys

import requests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="absolute URL of the origin")
    parser.add_argument("--method", default="GET")
    parser.add_argument("--data", help="the request body, as text")
    parser.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    parser.add_argument("--timeout", type=float, default=15.0)
    args = parser.parse_args()

    headers = {}
    for header in args.header:
        name, _, value = header.partition(":")
        headers[name.strip()] = value.strip()
    try:
        response = requests.request(args.method, args.url, data=args.data, headers=headers,
                                    timeout=args.timeout, allow_redirects=False)
    except Exception as error:  # noqa: BLE001 - any failure is reported to the test as text
        print(f"requests failed: {error!r}", file=sys.stderr)
        return 1
    json.dump({
        "status": response.status_code,
        # The raw urllib3 headers keep repeated fields apart.
        "headers": [[name, value] for name, value in response.raw.headers.items()],
        "bodyBase64": base64.b64encode(response.content).decode("ascii"),
    }, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

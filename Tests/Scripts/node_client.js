#!/usr/bin/env node
// Send one https request through an HTTP proxy from Node.js, the way Node code without a proxy
// library does it (Node has no built-in HTTPS_PROXY support): `http.request` with method
// CONNECT to the proxy, then `https.request` over a `tls.connect` on the tunnelled socket.
// The CAs Node trusts beyond its own come from NODE_EXTRA_CA_CERTS, read by Node at start.
//
//   node node_client.js --proxy http://127.0.0.1:P --url https://host:port/path
//                       [--method M] [--data TEXT] [--header 'Name: value']...
//
// Prints one JSON object {"status": int, "headers": [[name, value], ...], "bodyBase64": str}
// on stdout and exits 0, even for HTTP error statuses; any other failure (the CONNECT refused,
// a certificate Node does not trust) prints one line on stderr and exits 1.
'use strict';
const http = require('http');
const https = require('https');
const net = require('net');
const tls = require('tls');

function parseArguments(argv) {
  const options = { method: 'GET', headers: [], data: null, proxy: null, url: null };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) fail(`${flag} needs a value`);
    switch (flag) {
      case '--proxy': options.proxy = new URL(value); break;
      case '--url': options.url = new URL(value); break;
      case '--method': options.method = value; break;
      case '--data': options.data = Buffer.from(value, 'utf8'); break;
      case '--header': {
        const colon = value.indexOf(':');
        if (colon < 1) fail(`--header ${JSON.stringify(value)}: expected 'Name: value'`);
        options.headers.push([value.slice(0, colon).trim(), value.slice(colon + 1).trim()]);
        break;
      }
      default: fail(`unknown option ${flag}`);
    }
  }
  if (!options.proxy || !options.url) fail('--proxy and --url are required');
  return options;
}

function fail(message) {
  process.stderr.write(`node_client: ${message}\n`);
  process.exit(1);
}

const options = parseArguments(process.argv.slice(2));
const host = options.url.hostname.replace(/^\[(.*)\]$/, '$1');
const port = Number(options.url.port || 443);
const authority = `${options.url.hostname}:${port}`;
const timer = setTimeout(() => fail('timed out after 15 s'), 15000);

const connect = http.request({
  host: options.proxy.hostname,
  port: Number(options.proxy.port || 80),
  method: 'CONNECT',
  path: authority,
  headers: { Host: authority },
});
connect.on('error', (error) => fail(`CONNECT ${authority}: ${error.message}`));
connect.on('connect', (response, socket) => {
  if (response.statusCode !== 200) fail(`CONNECT ${authority} answered ${response.statusCode}`);
  // SNI carries host names only (RFC 6066); for an address the identity is checked against `host`.
  const tlsOptions = { socket, host, ALPNProtocols: ['http/1.1'] };
  if (!net.isIP(host)) tlsOptions.servername = host;
  const headers = {};
  for (const [name, value] of options.headers) headers[name] = value;
  if (options.data) headers['Content-Length'] = String(options.data.length);
  const request = https.request({
    host,
    port,
    method: options.method,
    path: options.url.pathname + options.url.search,
    headers,
    createConnection: () => tls.connect(tlsOptions),
  }, (answer) => {
    const chunks = [];
    answer.on('data', (chunk) => chunks.push(chunk));
    answer.on('end', () => {
      clearTimeout(timer);
      const pairs = [];
      for (let i = 0; i < answer.rawHeaders.length; i += 2) pairs.push([answer.rawHeaders[i], answer.rawHeaders[i + 1]]);
      const outcome = JSON.stringify({
        status: answer.statusCode,
        headers: pairs,
        bodyBase64: Buffer.concat(chunks).toString('base64'),
      });
      // Exit once it is written: closing the tunnel could still raise an error to report.
      process.stdout.write(outcome, () => process.exit(0));
    });
  });
  request.on('error', (error) => fail(`${options.method} ${options.url}: ${error.code || ''} ${error.message}`));
  request.end(options.data || undefined);
});
connect.end();

import Foundation

/// An https origin that clients reach through the proxy's interception: a scriptable
/// `TestUpstream` behind a `TLSFront` on 127.0.0.1, and the real `outbox` with
/// `tls.intercept.hosts: ["127.0.0.1"]` and the front's port in `forwardProxy.connectPorts`. A
/// client that sends `CONNECT 127.0.0.1:PORT` to the proxy (curl with `-x`, anything honouring
/// `HTTPS_PROXY`) speaks TLS to the proxy itself, which forwards what it reads to the origin
/// over its own TLS connection (trusting the test CA through `tls.caFile`) or queues it.
///
/// The proxy's data directory lives in a directory of this object's, so that the interception
/// CA the proxy creates there (`ca/outbox-ca.pem`) is there to hand to the clients, and so that
/// `outbox ca` can be run against the same config and data directory as the running proxy.
struct InterceptedOrigin {
    let backend: TestUpstream
    let front: TLSFront
    let outbox: OutboxProcess
    /// The reverse-mode upstream the proxy is also given; intercepted requests must not reach it.
    let reverseUpstream: TestUpstream
    /// Holds `config.json` and `data/`.
    let directory: TemporaryDirectory

    /// Probes every 0.1 s and retries every 0.1 s, up to 100 times: while the origin behind the
    /// front is stopped, the front still completes the proxy's handshakes (and so its probes)
    /// and then drops the connection, so each replay attempt fails anew until the origin is back.
    static let fastRecovery = """
        "reachability": {"probeIntervalSeconds": 0.1, "connectTimeoutSeconds": 1},
        "retry": {"preset": "immediate", "maxRetries": 100}
        """

    /// The start of a Python client (`python3 -c`) of an intercepted tunnel: `argv` is the
    /// proxy, the tunnel's target and the CA file; `raw` is the socket once the proxy answered
    /// the `CONNECT` `200`; `read_to_end(tls)` reads a socket until its peer closes.
    static let pythonTunnelPrelude = """
        import socket, ssl, sys

        def read_to_end(tls):
            received = b""
            while True:
                chunk = tls.recv(65536)
                if not chunk:
                    return received
                received += chunk

        proxy, target, cafile = sys.argv[1], sys.argv[2], sys.argv[3]
        host, port = proxy.rsplit(":", 1)
        raw = socket.create_connection((host, int(port)), timeout=20)
        raw.sendall(("CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n" % (target, target)).encode())
        answer = b""
        while b"\\r\\n\\r\\n" not in answer:
            answer += raw.recv(1)
        assert answer.startswith(b"HTTP/1.1 200"), answer

        """

    /// Starts the origin (answering with `handler`), its front, and the proxy. `allowedHosts`
    /// is `forwardProxy.allowedHosts`, `interceptHosts` is `tls.intercept.hosts`, `config`
    /// more top-level members of the proxy's config (JSON text without braces). With
    /// `exportingCA`, runs `outbox ca` with the proxy's config and data directory first, as
    /// the README tells users to, and requires it to print a certificate; without, the proxy
    /// creates the CA when it first needs it.
    static func start(allowedHosts: [String] = ["127.0.0.1"], interceptHosts: [String] = ["127.0.0.1"],
                      config extra: String = "", exportingCA: Bool = true, ipv6Loopback: Bool = false,
                      handler: @escaping TestUpstream.Handler = TestUpstream.answersOK) async throws -> InterceptedOrigin {
        let backend = try TestUpstream(handler: handler)
        let front = try await TLSFront.start(relayingTo: backend, ipv6Loopback: ipv6Loopback)
        let reverseUpstream = try TestUpstream()
        let directory = try TemporaryDirectory()
        let hosts = allowedHosts.map(TLSFixtures.jsonString).joined(separator: ", ")
        let intercepted = interceptHosts.map(TLSFixtures.jsonString).joined(separator: ", ")
        let config = TLSFixtures.config(tls: #""intercept": {"hosts": [\#(intercepted)]}"#, other: """
            "forwardProxy": {"enabled": true, "allowedHosts": [\(hosts)], "connectPorts": [\(front.port)]},
            \(fastRecovery)\(extra.isEmpty ? "" : ",\n" + extra)
            """)
        try directory.write(config, to: "config.json")
        if exportingCA {
            let printed = try await exportCA(configFile: directory.file("config.json"), dataDirectory: directory.file("data"))
            guard printed.hasPrefix("-----BEGIN CERTIFICATE-----") else {
                throw HarnessError("outbox ca printed no certificate:\n\(printed.prefix(2000))")
            }
        }
        let outbox = try await OutboxProcess.start(upstream: reverseUpstream.baseURL, config: config,
                                                   dataDirectory: directory.file("data"))
        return InterceptedOrigin(backend: backend, front: front, outbox: outbox, reverseUpstream: reverseUpstream,
                                 directory: directory)
    }

    /// Runs `outbox ca --config FILE --data-dir DIR` and returns what it printed on stdout;
    /// throws with its stderr unless it exits 0.
    static func exportCA(configFile: String, dataDirectory: String) async throws -> String {
        let child = try OutboxProcess.launch(["ca", "--config", configFile, "--data-dir", dataDirectory])
        let exit = try await child.waitForExit(timeout: .seconds(30))
        guard exit == .exited(0) else {
            throw HarnessError("outbox ca: \(exit); stderr:\n\(child.stderrText.suffix(2000))")
        }
        return child.stdoutText
    }

    /// `outbox ca` against this proxy's config and data directory.
    func exportCA() async throws -> String {
        try await Self.exportCA(configFile: directory.file("config.json"), dataDirectory: directory.file("data"))
    }

    /// The directory the proxy keeps its interception CA in.
    var caDirectory: String { directory.file("data/ca") }

    /// The interception CA's certificate: what the clients must trust.
    var caCertificateFile: String { caDirectory + "/outbox-ca.pem" }

    /// The interception CA's private key.
    var caKeyFile: String { caDirectory + "/outbox-ca-key.pem" }

    /// `https://127.0.0.1:FRONTPORT` + `path`: a URL the proxy intercepts.
    func url(_ path: String) -> String { front.baseURL + path }

    /// The proxy, the front and what the origin received, for failure messages.
    var diagnostics: String {
        "\(outbox)\n\(front)\norigin got: \(backend.requests.map { "\($0.method) \($0.target)" }), problems: \(backend.problems)"
    }
}

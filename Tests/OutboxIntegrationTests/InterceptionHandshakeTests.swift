import Foundation
import TestPrerequisites
import Testing

/// The TLS handshake Outbox answers itself on an intercepted `CONNECT` (SPEC §7.2): a leaf only
/// for a name `tls.intercept.hosts` matches (any other SNI name gets the alert
/// `unrecognized_name`), nothing but TLS after the `200` (a stalled or broken handshake is
/// closed, never answered with plain HTTP), and TLS 1.2 only with forward-secret AEAD suites
/// (SPEC §7.1's profile, which the intercepting side shares).
@Suite("HTTPS interception: the handshake Outbox answers", .harnessThreads)
struct InterceptionHandshakeTests {
    static let openssl = ChildProcess.which("openssl")
    static let python = ChildProcess.which("python3")

    /// `127.0.0.1` (the front, which the tunnels name) and the names under `example.com`.
    static let interceptHosts = ["127.0.0.1", "*.example.com"]

    // MARK: - leaves only for intercepted names

    /// `openssl s_client -servername other.example` through a tunnel to an intercepted host:
    /// the alert, and no certificate at all, however often it asks; a name the patterns match
    /// gets its leaf on the same tunnel host, so it is the name that is refused.
    @Test(.requires(openssl != nil, "openssl is not installed"))
    func anSNINameOutsideTheInterceptedHostsGetsUnrecognizedNameAndNoCertificate() async throws {
        let openssl = try #require(Self.openssl)
        let origin = try await InterceptedOrigin.start(interceptHosts: Self.interceptHosts)
        func handshake(_ serverName: String) async throws -> ChildProcess.Observed {
            try await ChildProcess.run(openssl, [
                "s_client", "-proxy", "127.0.0.1:\(origin.outbox.port)", "-connect", origin.front.authority,
                "-servername", serverName, "-CAfile", origin.caCertificateFile, "-verify_hostname", serverName,
            ])
        }
        for attempt in 1...2 {
            let refused = try await handshake("other.example")
            #expect(refused.stderrText.contains("unrecognized name") && refused.stderrText.contains("SSL alert number 112"),
                    "attempt \(attempt): s_client stderr:\n\(refused.stderrText)\n\(origin.diagnostics)")
            #expect(refused.stdoutText.contains("no peer certificate available"),
                    "attempt \(attempt): a certificate was presented:\n\(refused.stdoutText)")
            #expect(!refused.stdoutText.contains("other.example"), "attempt \(attempt):\n\(refused.stdoutText)")
        }
        try await origin.outbox.waitForLogLine(containing: ["intercept_refused", "serverName=other.example"])

        let accepted = try await handshake("api.example.com")
        #expect(accepted.stdoutText.contains("Verify return code: 0 (ok)"), "s_client:\n\(accepted.stdoutText)\n\(accepted.stderrText)")
        #expect(accepted.stdoutText.contains("subject=O = Outbox"), "\(accepted.stdoutText)")
        #expect(origin.backend.receivedByteCount == 0, "\(origin.diagnostics)")
    }

    /// Python's `ssl`, as `requests` and every Python client use it, reports the refusal by its
    /// name (`TLSV1_UNRECOGNIZED_NAME`).
    @Test(.requires(python != nil, "python3 is not installed"))
    func pythonSeesTheRefusalAsUnrecognizedName() async throws {
        let python = try #require(Self.python)
        let origin = try await InterceptedOrigin.start(interceptHosts: Self.interceptHosts)
        let script = InterceptedOrigin.pythonTunnelPrelude + """
            context = ssl.create_default_context(cafile=cafile)
            try:
                context.wrap_socket(raw, server_hostname="other.example")
                print("handshake completed")
            except ssl.SSLError as error:
                print("refused", error.reason)
            """
        let result = try await ChildProcess.run(python, ["-c", script, "127.0.0.1:\(origin.outbox.port)",
                                                         origin.front.authority, origin.caCertificateFile])
        #expect(result.stdoutText == "refused TLSV1_UNRECOGNIZED_NAME\n",
                "python: \(result.stdoutText)\n\(result.stderrText)\n\(origin.diagnostics)")
    }

    // MARK: - nothing but TLS after the 200

    /// What the client does after reading the `200` to its intercepted `CONNECT`.
    enum AfterTheConnect: String, CaseIterable, Sendable, CustomStringConvertible {
        /// Sends nothing.
        case nothing
        /// Sends the first 60 bytes of a ClientHello, then nothing.
        case halfAClientHello
        /// Sends a whole ClientHello (no SNI: the CONNECT host's leaf), then never answers
        /// Outbox's handshake records.
        case aClientHelloThenSilence
        /// Sends a plain HTTP request instead of a ClientHello.
        case plainHTTP
        /// Sends half a ClientHello, then EOF.
        case halfAClientHelloThenEOF

        var description: String { rawValue }

        /// Whether the header timeout is what ends the connection.
        var stalls: Bool { self == .nothing || self == .halfAClientHello || self == .aClientHelloThenSilence }
    }

    /// Whatever the client does, every byte after the `200` is TLS (or there is none), and the
    /// connection ends: at the header timeout (0.5 s here) when the client stalls.
    @Test(arguments: AfterTheConnect.allCases)
    func afterThe200OnlyTLSIsWrittenAndAStalledHandshakeIsClosed(_ client: AfterTheConnect) async throws {
        let origin = try await InterceptedOrigin.start(config: #""limits": {"headerTimeoutSeconds": 0.5}"#)
        let hello = try Self.capturedClientHello("openssl-nosni.bin")
        let connection = try origin.outbox.connect()
        try connection.send("CONNECT \(origin.front.authority) HTTP/1.1\r\nHost: \(origin.front.authority)\r\n\r\n")
        let established = try connection.readResponse(to: "CONNECT")
        #expect(established.status == 200, "\(established)\n\(origin.diagnostics)")
        switch client {
        case .nothing:
            break
        case .halfAClientHello:
            try connection.send(Array(hello.prefix(60)))
        case .aClientHelloThenSilence:
            try connection.send(hello)
        case .plainHTTP:
            try connection.send("GET /plain HTTP/1.1\r\nHost: \(origin.front.authority)\r\n\r\n")
        case .halfAClientHelloThenEOF:
            try connection.send(Array(hello.prefix(60)))
            connection.shutdownWrite()
        }
        // Far beyond the header timeout, far below the idle timeout (60 s) that would also end it.
        let after = try connection.readUntilEOF(timeout: .seconds(20))
        if client == .aClientHelloThenSilence {
            #expect(!after.isEmpty, "no answer to a whole ClientHello\n\(origin.diagnostics)")
        } else {
            #expect(after.isEmpty, "\(after.count) bytes after the 200: \(Self.printable(after))\n\(origin.diagnostics)")
        }
        #expect(Self.tlsRecordsEndExactly(after), "not TLS after the 200: \(Self.printable(after))\n\(origin.diagnostics)")
        if client.stalls {
            try await origin.outbox.waitForLog(containing: "client_tls_timeout")
        }
        #expect(!origin.outbox.stderrText.contains("header_timeout"), "\(origin.outbox)")
        #expect(origin.backend.receivedByteCount == 0, "\(origin.diagnostics)")
    }

    // MARK: - TLS 1.2 suites

    /// A TLS 1.2 client offering one suite: forward-secret AEAD suites are accepted, and the
    /// request inside is answered; CBC with SHA-1 (with or without ECDHE) is refused in the
    /// handshake, and nothing reaches the origin. (`AES128-SHA` also needs an RSA key, which
    /// the interception leaves never have: that one was refused before too.)
    @Test(.requires(python != nil, "python3 is not installed"), arguments: [
        ("ECDHE-ECDSA-AES128-GCM-SHA256", true), ("ECDHE-ECDSA-AES256-GCM-SHA384", true),
        ("ECDHE-ECDSA-CHACHA20-POLY1305", true), ("ECDHE-ECDSA-AES128-SHA", false), ("ECDHE-ECDSA-AES256-SHA384", false),
        ("AES128-SHA", false),
    ])
    func aTLS12ClientIsAcceptedOnlyWithAForwardSecretAEADSuite(_ cipher: String, accepted: Bool) async throws {
        let python = try #require(Self.python)
        let origin = try await InterceptedOrigin.start(handler: { request in .respond(.text("read \(request.target)")) })
        let script = InterceptedOrigin.pythonTunnelPrelude + """
            context = ssl.create_default_context(cafile=cafile)
            context.maximum_version = ssl.TLSVersion.TLSv1_2
            context.set_ciphers(sys.argv[4])
            try:
                tls = context.wrap_socket(raw, server_hostname=target.rsplit(":", 1)[0])
            except ssl.SSLError as error:
                print("refused", error.reason)
                sys.exit(0)
            tls.sendall(("GET /suite HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n" % target).encode())
            received = read_to_end(tls)
            print("accepted", tls.version(), tls.cipher()[0], received.split(b"\\r\\n", 1)[0].decode(), received.endswith(b"read /suite"))
            """
        let result = try await ChildProcess.run(python, ["-c", script, "127.0.0.1:\(origin.outbox.port)",
                                                         origin.front.authority, origin.caCertificateFile, cipher])
        let line = result.stdoutText
        if accepted {
            #expect(line == "accepted TLSv1.2 \(cipher) HTTP/1.1 200 OK True\n", "python: \(line)\n\(result.stderrText)\n\(origin.diagnostics)")
        } else {
            #expect(line.hasPrefix("refused "), "python: \(line)\n\(result.stderrText)\n\(origin.diagnostics)")
            #expect(origin.backend.receivedByteCount == 0, "\(origin.diagnostics)")
        }
    }

    // MARK: - helpers

    /// A ClientHello a real client sent (`Tests/Fixtures/tls/client-hello`).
    static func capturedClientHello(_ file: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: TLSFixtures.directory + "/client-hello/" + file)))
    }

    /// Whether `bytes` are whole TLS records, one after another to the last byte (RFC 8446
    /// §5.1: a content type 20–23, version 3.x, a length of at most 2^14 + 256): plain HTTP
    /// (`HTTP/1.1 408 …`) is not.
    static func tlsRecordsEndExactly(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            guard offset + 5 <= bytes.count, (20...23).contains(bytes[offset]), bytes[offset + 1] == 3 else { return false }
            let length = Int(bytes[offset + 3]) << 8 | Int(bytes[offset + 4])
            guard length <= (1 << 14) + 256 else { return false }
            offset += 5 + length
        }
        return offset == bytes.count
    }

    /// The first bytes as text, for failure messages.
    static func printable(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.prefix(200), as: UTF8.self).debugDescription
    }
}

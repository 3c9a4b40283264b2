import Testing

/// What Outbox accepts of an https origin beyond a trusted chain (SPEC §7.1): the host named in
/// the certificate's subjectAltName, never only in its CN (RFC 9525), and TLS 1.2 only with
/// forward-secret AEAD suites (ECDHE with AES-GCM or ChaCha20-Poly1305, Mozilla's
/// "intermediate"). An origin that fails either is refused in the handshake: the request was
/// never sent, so the origin is unreachable (a GET gets `503`, a write is stored) and its
/// `lastError` says `tls: …`.
@Suite("HTTPS upstream: names in subjectAltName only, forward-secret AEAD suites", .harnessThreads)
struct SecureUpstreamPolicyTests {
    static let fastProbes = #""reachability": {"probeIntervalSeconds": 0.1, "connectTimeoutSeconds": 2}"#

    /// A leaf of the trusted test CA, `CN=localhost` and no subjectAltName, at
    /// `https://localhost:PORT`: OpenSSL's default host check would accept it by its CN.
    @Test func aLeafNamingTheHostOnlyInItsCNIsRefused() async throws {
        let backend = try TestUpstream()
        let front = try await TLSFront.start(relayingTo: backend, presenting: [.cnOnly], ipv6Loopback: true)
        let upstream = "https://localhost:\(front.port)"
        let outbox = try await OutboxProcess.start(upstream: upstream, config: TLSFixtures.config(other: Self.fastProbes))

        let read = try outbox.exchange("GET /cn HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        expectErrorResponse(read, status: 503, from: outbox)
        try await front.waitForFailedHandshake()
        let queued = try outbox.enqueue(body: "kept for later")
        let entry = try await outbox.waitForOriginStatus(upstream) { entry in
            entry.bool("online") == false && entry.string("lastError")?.hasPrefix("tls: ") == true
        }
        #expect(entry.string("lastError") == "tls: certificate verify failed: hostname mismatch", "\(entry)")
        let operation = try outbox.operation(queued.id)
        #expect(["pending", "inProgress"].contains(operation.string("status") ?? ""), "\(operation)")
        #expect(backend.requests.isEmpty, "the request reached the origin: \(backend.requests)\n\(outbox)\n\(front)")
    }

    /// An origin speaking TLS 1.2 with one suite, and whether Outbox must agree to it.
    struct TLS12Origin: Sendable, CustomTestStringConvertible {
        let cipher: String
        let identity: TLSFixtures.Identity
        let accepted: Bool
        let why: String
        var testDescription: String { "\(cipher) (\(why))" }
    }

    static let origins = [
        TLS12Origin(cipher: "ECDHE-ECDSA-AES128-GCM-SHA256", identity: .server, accepted: true, why: "ECDHE, AES-GCM"),
        TLS12Origin(cipher: "ECDHE-RSA-AES256-GCM-SHA384", identity: .rsaServer, accepted: true, why: "ECDHE, AES-GCM, RSA key"),
        TLS12Origin(cipher: "ECDHE-ECDSA-CHACHA20-POLY1305", identity: .server, accepted: true, why: "ECDHE, ChaCha20-Poly1305"),
        TLS12Origin(cipher: "AES128-SHA", identity: .rsaServer, accepted: false, why: "static RSA, CBC with SHA-1"),
        TLS12Origin(cipher: "AES128-GCM-SHA256", identity: .rsaServer, accepted: false, why: "static RSA key exchange"),
        TLS12Origin(cipher: "ECDHE-ECDSA-AES128-SHA", identity: .server, accepted: false, why: "CBC with SHA-1"),
        TLS12Origin(cipher: "ECDHE-RSA-AES128-SHA256", identity: .rsaServer, accepted: false, why: "CBC"),
    ]

    @Test(arguments: origins)
    func aTLS12OriginIsReachedOnlyWithAForwardSecretAEADSuite(_ origin: TLS12Origin) async throws {
        let backend = try TestUpstream(handler: { _ in .respond(.text("hello over \(origin.cipher)")) })
        let front = try await TLSFront.start(relayingTo: backend, presenting: [origin.identity], tls12Ciphers: origin.cipher)
        let outbox = try await OutboxProcess.start(upstream: front.baseURL, config: TLSFixtures.config(other: Self.fastProbes))
        let read = try outbox.exchange("GET /suite HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        if origin.accepted {
            #expect(read.status == 200 && read.bodyText == "hello over \(origin.cipher)", "\(read)\n\(outbox)\n\(front)")
            #expect(front.failedHandshakes.isEmpty, "\(front)")
            return
        }
        expectErrorResponse(read, status: 503, from: outbox)
        try await front.waitForFailedHandshake()
        let queued = try outbox.enqueue(body: "kept for later")
        let entry = try await outbox.waitForOriginStatus(front.baseURL) { $0.bool("online") == false }
        #expect(entry.string("lastError")?.hasPrefix("tls: ") == true, "\(entry)")
        let operation = try outbox.operation(queued.id)
        #expect(["pending", "inProgress"].contains(operation.string("status") ?? ""), "\(operation)")
        #expect(backend.requests.isEmpty, "the request reached the origin: \(backend.requests)\n\(outbox)\n\(front)")
    }
}

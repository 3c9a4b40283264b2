import Foundation
@testable import OutboxNet
import TestPrerequisites
import Testing

/// A throwaway CA and a leaf it signed (SAN DNS:localhost, IP:127.0.0.1), made with the
/// `openssl` command at first use, and the contexts the tests need. The files are deleted at
/// once: the contexts have read them.
struct TLSTestCertificates {
    let server: TLSContext
    /// Trusts the throwaway CA (as `tls.caFile`).
    let trustingClient: TLSContext
    /// Only the system trust store, which does not hold the throwaway CA.
    let systemClient: TLSContext
    let unverifiedClient: TLSContext
    /// Requires a client certificate from the throwaway CA (mTLS).
    let mutualServer: TLSContext
    /// Trusts the throwaway CA and presents the leaf as its client certificate.
    let certifiedClient: TLSContext
    /// Presents a leaf of the throwaway CA that names `localhost` in its subject's CN only,
    /// with no subjectAltName.
    let cnOnlyServer: TLSContext

    static let openssl: String? = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        .split(separator: ":")
        .map { "\($0)/openssl" }
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    static let shared: Result<TLSTestCertificates, any Error> = Result { try make() }

    private static func make() throws -> TLSTestCertificates {
        guard let openssl else { throw TLSError("openssl not found") }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        try Data("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n".utf8)
            .write(to: URL(fileURLWithPath: path("leaf.ext")))
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try run(openssl, ["req", "-x509"] + ec + ["-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2",
                                                   "-subj", "/CN=Outbox throwaway test CA",
                                                   "-addext", "basicConstraints=critical,CA:TRUE",
                                                   "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        try run(openssl, ["req"] + ec + ["-keyout", path("leaf.key"), "-out", path("leaf.csr"), "-subj", "/CN=localhost"])
        try run(openssl, ["x509", "-req", "-in", path("leaf.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                          "-set_serial", "1", "-days", "2", "-extfile", path("leaf.ext"), "-out", path("leaf.pem")])
        try Data("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n".utf8).write(to: URL(fileURLWithPath: path("cn-only.ext")))
        try run(openssl, ["x509", "-req", "-in", path("leaf.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                          "-set_serial", "2", "-days", "2", "-extfile", path("cn-only.ext"), "-out", path("cn-only.pem")])
        func bytes(_ name: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: URL(fileURLWithPath: path(name)))) }
        let leaf = (chainPEM: try bytes("leaf.pem"), keyPEM: try bytes("leaf.key"))
        return TLSTestCertificates(
            server: try TLSContext(serverCertificatePEM: leaf.chainPEM, keyPEM: leaf.keyPEM),
            trustingClient: try TLSContext(clientVerifying: true, caFile: path("ca.pem")),
            systemClient: try TLSContext(clientVerifying: true),
            unverifiedClient: try TLSContext(clientVerifying: false),
            mutualServer: try TLSContext(serverCertificatePEM: leaf.chainPEM, keyPEM: leaf.keyPEM, clientCAFile: path("ca.pem")),
            certifiedClient: try TLSContext(clientVerifying: true, caFile: path("ca.pem"), certificate: leaf),
            cnOnlyServer: try TLSContext(serverCertificatePEM: try bytes("cn-only.pem"), keyPEM: leaf.keyPEM))
    }

    private static func run(_ executable: String, _ arguments: [String]) throws {
        let (status, output) = try ChildProcess.run(executable, arguments)
        guard status == 0 else { throw TLSError("openssl \(arguments.first ?? ""): \(output)") }
    }
}

/// A client and a server engine joined by moving each one's output into the other: the
/// network of these tests, in memory and deterministic.
struct TLSPair {
    let client: TLSEngine
    let server: TLSEngine

    /// Moves ciphertext both ways until neither side has any left; true when some moved.
    @discardableResult
    func pump() -> Bool {
        var moved = false
        while client.hasOutput || server.hasOutput {
            server.feed(client.drainOutput())
            client.feed(server.drainOutput())
            moved = true
        }
        return moved
    }

    /// Steps both handshakes, moving their records, until each has completed or failed, or
    /// nothing moves any more; the results at that point.
    func handshake() -> (client: TLSEngine.HandshakeResult, server: TLSEngine.HandshakeResult) {
        func settled(_ result: TLSEngine.HandshakeResult) -> Bool { result != .wantRead && result != .wantWrite }
        var clientResult = client.handshake()
        var serverResult = server.handshake()
        for _ in 0..<100 {  // a handshake takes a few rounds; the bound keeps a bug from hanging the suite
            let moved = pump()
            if !settled(clientResult) { clientResult = client.handshake() }
            if !settled(serverResult) { serverResult = server.handshake() }
            if !moved && !client.hasOutput && !server.hasOutput { break }
        }
        return (clientResult, serverResult)
    }

    /// Everything `engine` can decrypt from what it has been fed, and how the read ended.
    static func readAll(_ engine: TLSEngine) -> (bytes: [UInt8], end: TLSEngine.ReadResult) {
        var collected: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1000)
        while true {
            let result = engine.read(into: &buffer)
            guard case .bytes(let count) = result else { return (collected, result) }
            collected += buffer[..<count]
        }
    }
}

@Suite("TLS engine in memory", .requires(TLSTestCertificates.openssl != nil, "needs the openssl command"))
struct TLSEngineTests {
    func pair(_ client: (TLSTestCertificates) -> TLSContext, host: String,
              server: (TLSTestCertificates) -> TLSContext = \.server) throws -> TLSPair {
        let certificates = try TLSTestCertificates.shared.get()
        return TLSPair(client: try TLSEngine(clientOf: client(certificates), host: host),
                       server: try TLSEngine(serverOf: server(certificates)))
    }

    func failureReason(_ result: TLSEngine.HandshakeResult) -> String? {
        if case .failed(let error) = result { return error.reason }
        return nil
    }

    @Test("a trusted certificate for the host name: the handshake completes with ALPN http/1.1")
    func handshakeCompletes() throws {
        let link = try pair(\.trustingClient, host: "localhost")
        let result = link.handshake()
        #expect(result.client == .complete)
        #expect(result.server == .complete)
        #expect(link.client.alpnProtocol == "http/1.1")
        #expect(link.server.alpnProtocol == "http/1.1")
        #expect(link.server.serverName == "localhost")
    }

    @Test("an IP literal host is checked against the certificate's IP addresses and sent without SNI")
    func ipLiteral() throws {
        let link = try pair(\.trustingClient, host: "127.0.0.1")
        #expect(link.handshake().client == .complete)
        #expect(link.server.serverName == nil)
        #expect(try pair(\.trustingClient, host: "[127.0.0.1]").handshake().client == .complete)
        let wrongIP = try pair(\.trustingClient, host: "[::1]").handshake().client
        #expect(failureReason(wrongIP)?.contains("verify") == true, "\(wrongIP)")
    }

    @Test("bytes pass both ways, and close_notify reads as closed")
    func dataBothWaysThenClose() throws {
        let link = try pair(\.trustingClient, host: "localhost")
        try #require(link.handshake().client == .complete)
        let request = Array("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
        let response = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }  // several records
        #expect(link.client.write(request) == .written)
        link.pump()
        let atServer = TLSPair.readAll(link.server)
        #expect(atServer.bytes == request)
        #expect(atServer.end == .wantRead)
        #expect(link.server.write(response) == .written)
        link.pump()
        let atClient = TLSPair.readAll(link.client)
        #expect(atClient.bytes == response)
        #expect(atClient.end == .wantRead)

        #expect(link.server.shutdown() == false)  // sent; the client's not seen yet
        link.pump()
        #expect(TLSPair.readAll(link.client).end == .closed)
        link.client.shutdown()
        link.pump()
        #expect(TLSPair.readAll(link.server).end == .closed)
    }

    @Test("a session the server handed out resumes the next connection, for a name and an IP", arguments: ["localhost", "127.0.0.1"])
    func sessionResumption(host: String) throws {
        let certificates = try TLSTestCertificates.shared.get()
        let first = try pair(\.trustingClient, host: host)
        try #require(first.handshake().client == .complete)
        // TLS 1.3 tickets follow the handshake: the client meets them when it reads.
        #expect(first.server.write(Array("hello".utf8)) == .written)
        first.pump()
        #expect(TLSPair.readAll(first.client).bytes == Array("hello".utf8))
        let session = try #require(first.client.takeNewSession(), "no session arrived")
        #expect(!first.client.resumedSession)

        let second = TLSPair(client: try TLSEngine(clientOf: certificates.trustingClient, host: host),
                             server: try TLSEngine(serverOf: certificates.server))
        second.client.resume(session)
        try #require(second.handshake().client == .complete)
        #expect(second.client.resumedSession)
    }

    @Test("a certificate for another host name fails verification, naming why")
    func wrongHostName() throws {
        let result = try pair(\.trustingClient, host: "api.example.com").handshake()
        let reason = try #require(failureReason(result.client), "\(result.client)")
        #expect(reason.contains("verify"))
        #expect(reason.contains("hostname mismatch"))
    }

    /// OpenSSL's default host check falls back to the subject's CN when there is no DNS
    /// subjectAltName; RFC 9525 §6.3 forbids it, and so does Outbox.
    @Test("a trusted certificate naming the host only in its CN fails verification: hostname mismatch")
    func nameOnlyInTheCommonName() throws {
        let result = try pair(\.trustingClient, host: "localhost", server: \.cnOnlyServer).handshake()
        let reason = try #require(failureReason(result.client), "\(result.client)")
        #expect(reason == "certificate verify failed: hostname mismatch")
    }

    @Test("a certificate from a CA outside the trust store fails: certificate verify failed")
    func untrustedCA() throws {
        let link = try pair(\.systemClient, host: "localhost")
        let result = link.handshake()
        let reason = try #require(failureReason(result.client), "\(result.client)")
        #expect(reason.hasPrefix("certificate verify failed: "))
        #expect(!reason.contains("\n"))
        // The client's alert tells the server why too.
        #expect(failureReason(result.server)?.contains("unknown ca") == true, "\(result.server)")
    }

    @Test("verify: false accepts the untrusted certificate, and a wrong host name")
    func verifyOff() throws {
        #expect(try pair(\.unverifiedClient, host: "localhost").handshake().client == .complete)
        let link = try pair(\.unverifiedClient, host: "api.example.com")
        #expect(link.handshake().client == .complete)
        #expect(link.client.write(Array("ping".utf8)) == .written)
        link.pump()
        #expect(TLSPair.readAll(link.server).bytes == Array("ping".utf8))
    }

    @Test("a server that requires a client certificate gets one from a client that has it, and refuses one without")
    func clientCertificate() throws {
        let mutual = try pair(\.certifiedClient, host: "localhost", server: \.mutualServer).handshake()
        #expect(mutual.client == .complete)
        #expect(mutual.server == .complete)

        // In TLS 1.3 the client finishes first; the server's refusal reaches it as an alert.
        let link = try pair(\.trustingClient, host: "localhost", server: \.mutualServer)
        let refused = link.handshake()
        let reason = try #require(failureReason(refused.server), "\(refused.server)")
        #expect(reason.contains("peer did not return a certificate"))
        #expect(link.client.write(Array("x".utf8)) == .written)
        link.pump()
        var buffer = [UInt8](repeating: 0, count: 100)
        if case .failed(let error) = link.client.read(into: &buffer) {
            #expect(error.reason.contains("certificate required"))
        } else {
            Issue.record("the client read no alert after the server refused it")
        }
    }

    @Test("writing before the handshake waits for it instead of failing")
    func writeBeforeHandshake() throws {
        let link = try pair(\.trustingClient, host: "localhost")
        #expect(link.client.write(Array("early".utf8)) == .wantRead)
        #expect(link.handshake().client == .complete)
        #expect(link.client.write(Array("early".utf8)) == .written)
        link.pump()
        #expect(TLSPair.readAll(link.server).bytes == Array("early".utf8))
    }

    @Test("bytes that are not TLS fail the handshake with OpenSSL's one-line reason")
    func notTLS() throws {
        let certificates = try TLSTestCertificates.shared.get()
        let client = try TLSEngine(clientOf: certificates.trustingClient, host: "localhost")
        #expect(client.handshake() == .wantRead)
        client.feed(Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8))
        let reason = try #require(failureReason(client.handshake()))
        #expect(reason == "wrong version number")
    }

    @Test("a CA file that cannot be read is an error naming the file")
    func missingCAFile() throws {
        let missing = "/nonexistent/outbox-test-ca.pem"
        #expect {
            try TLSContext(clientVerifying: true, caFile: missing)
        } throws: { error in
            (error as? TLSError)?.reason == "cannot load CA file \(missing): No such file or directory"
        }
    }

    @Test("PEM text that holds no certificate is refused when the server context is made")
    func notACertificate() throws {
        #expect(throws: TLSError.self) {
            try TLSContext(serverCertificatePEM: Array("not a certificate".utf8), keyPEM: [])
        }
    }
}

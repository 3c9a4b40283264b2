import Foundation
@testable import OutboxNet
import TestPrerequisites
import Testing

/// The leaf cache: one context per canonical name, reused; bounded, dropping the name used
/// longest ago; and every leaf carries the one key made with the issuer.
@Suite("Leaf certificate cache")
struct LeafCertificateIssuerTests {
    static func issuer(capacity: Int = LeafCertificateIssuer.defaultCapacity) throws -> (LeafCertificateIssuer, CADirectory) {
        let data = try CADirectory()
        let authority = try InterceptionCA.prepare(in: data.caDirectory, hosts: ["*.example.com", "127.0.0.1", "::1"])
        return (try LeafCertificateIssuer(authority: authority, capacity: capacity), data)
    }

    @Test func aNameIsMintedOnceAndItsSpellingsShareTheContext() throws {
        let (issuer, _) = try Self.issuer()
        let first = try issuer.context(forHost: "api.example.com")
        #expect(try issuer.context(forHost: "api.example.com") === first)
        #expect(try issuer.context(forHost: "API.Example.COM.") === first)
        let v6 = try issuer.context(forHost: "::1")
        #expect(try issuer.context(forHost: "[0:0:0:0:0:0:0:1]") === v6)
        #expect(try issuer.context(forHost: "b.example.com") !== first)
        #expect(issuer.cachedCount == 3)
    }

    @Test func theCacheKeepsAtMostItsCapacityAndDropsTheNameUsedLongestAgo() throws {
        let (issuer, _) = try Self.issuer(capacity: 3)
        let a = try issuer.context(forHost: "a.example.com")
        let b = try issuer.context(forHost: "b.example.com")
        _ = try issuer.context(forHost: "c.example.com")
        #expect(try issuer.context(forHost: "a.example.com") === a)  // a is now the most recent
        _ = try issuer.context(forHost: "d.example.com")  // full: b, used longest ago, goes
        #expect(issuer.cachedCount == 3)
        #expect(try issuer.context(forHost: "a.example.com") === a)
        #expect(try issuer.context(forHost: "b.example.com") !== b, "b should have been dropped and minted again")
        #expect(issuer.cachedCount == 3)
    }

    @Test(.requires(TLSTestCertificates.openssl != nil, "needs the openssl command"))
    func everyLeafCarriesTheSameKeyAndADifferentSerial() throws {
        let (issuer, data) = try Self.issuer()
        var keys: Set<String> = []
        var serials: Set<String> = []
        for host in ["a.example.com", "b.example.com", "127.0.0.1"] {
            let file = data.path + "/\(host).pem"
            try Data(try #require(LeafCertificateIssuer.certificatePEM(of: try issuer.context(forHost: host))))
                .write(to: URL(fileURLWithPath: file))
            keys.insert(try OpenSSLCommand.run(["x509", "-in", file, "-noout", "-pubkey"]).output)
            serials.insert(try OpenSSLCommand.run(["x509", "-in", file, "-noout", "-serial"]).output)
        }
        #expect(keys.count == 1)
        #expect(serials.count == 3)
    }

    @Test(arguments: ["", "a..example.com", "bad host.example.com", "x\u{0}.example.com", "10.1"])
    func aHostThatIsNoNameIsRefused(_ host: String) throws {
        let (issuer, _) = try Self.issuer()
        #expect(throws: TLSError.self) { try issuer.context(forHost: host) }
        #expect(issuer.cachedCount == 0)
    }

    /// What a client whose SNI names a host not intercepted gets: OpenSSL's fatal alert
    /// `unrecognized_name` (112), as one plaintext alert record, and no leaf is made.
    @Test(arguments: ["openssl.bin", "curl.bin", "python.bin", "node.bin"])
    func aRefusedClientHelloGetsTheAlertUnrecognizedNameAndNoLeaf(_ file: String) throws {
        let (issuer, _) = try Self.issuer()
        let hello = [UInt8](try Data(contentsOf: ClientHelloPeekTests.fixtures.appendingPathComponent(file)))
        let alert = hello.withUnsafeBytes { issuer.unrecognizedNameAlert(answering: $0) }
        // ContentType alert (21), a TLS 1.x record version, length 2, level fatal (2), description 112.
        #expect(alert.count == 7, "\(alert)")
        #expect(alert.first == 21 && alert.dropFirst().first == 3, "\(alert)")
        #expect(Array(alert.suffix(4)) == [0, 2, 2, 112], "\(alert)")
        #expect(issuer.cachedCount == 0)
    }

    @Test func aTLSClientReadsTheRefusalAsUnrecognizedName() throws {
        let (issuer, _) = try Self.issuer()
        let client = try TLSEngine(clientOf: try TLSContext(clientVerifying: false), host: "other.example")
        #expect(client.handshake() == .wantRead)
        let alert = client.drainOutput().withUnsafeBytes { issuer.unrecognizedNameAlert(answering: $0) }
        client.feed(alert)
        #expect(client.handshake() == .failed(TLSError("tlsv1 unrecognized name")))
        #expect(issuer.cachedCount == 0)
    }
}

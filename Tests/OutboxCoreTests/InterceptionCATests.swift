import Foundation
import Glibc
@testable import OutboxNet
import TestPrerequisites
import Testing

/// The `openssl` command, as the independent judge of the certificates Outbox makes.
enum OpenSSLCommand {
    /// Runs `openssl ARGUMENTS` and returns its exit status and its stdout and stderr together.
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        guard let openssl = TLSTestCertificates.openssl else { throw TLSError("openssl not found") }
        return try ChildProcess.run(openssl, arguments)
    }

    /// `openssl verify -purpose sslserver -CAfile CA LEAF`, with the leaf written to a file.
    static func verify(leafPEM: [UInt8], caFile: String, in directory: CADirectory) throws -> (status: Int32, output: String) {
        let leaf = directory.path + "/leaf-\(UUID().uuidString).pem"
        try Data(leafPEM).write(to: URL(fileURLWithPath: leaf))
        return try run(["verify", "-purpose", "sslserver", "-CAfile", caFile, leaf])
    }
}

/// A fresh temporary directory standing for a data directory, removed with this value.
final class CADirectory {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-ca-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// Where `InterceptionCA.prepare` keeps its files for this data directory.
    var caDirectory: String { path + "/ca" }
    var certificateFile: String { caDirectory + "/" + InterceptionCA.certificateFileName }
    var keyFile: String { caDirectory + "/" + InterceptionCA.keyFileName }

    func bytes(_ file: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
    }

    func mode(_ file: String) -> mode_t? {
        var info = stat()
        return stat(file, &info) == 0 ? info.st_mode & 0o777 : nil
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// The interception CA as files and certificates: modes, extensions and constraints as
/// `openssl x509 -text` reads them, leaves that `openssl verify` accepts inside the
/// constraint and refuses outside it, the fingerprint, reloading, refusing, replacing.
@Suite("Interception CA", .requires(TLSTestCertificates.openssl != nil, "needs the openssl command"))
struct InterceptionCATests {
    static let hosts = ["api.example.com", "*.svc.example.org", "127.0.0.1", "::1"]

    @Test func createdCAFilesHaveTheirModesAndTheKeyIsNotInTheCertificateFile() throws {
        let data = try CADirectory()
        let authority = try InterceptionCA.prepare(in: data.caDirectory, hosts: Self.hosts)
        #expect(data.mode(data.caDirectory) == 0o700)
        #expect(data.mode(data.certificateFile) == 0o644)
        #expect(data.mode(data.keyFile) == 0o600)
        #expect(try data.bytes(data.certificateFile) == authority.certificatePEM)
        let certificateText = String(decoding: authority.certificatePEM, as: UTF8.self)
        #expect(certificateText.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(!certificateText.contains("PRIVATE KEY"))
        #expect(String(decoding: try data.bytes(data.keyFile), as: UTF8.self).hasPrefix("-----BEGIN PRIVATE KEY-----"))
        // No temporary file is left behind.
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: data.caDirectory))
                == [InterceptionCA.certificateFileName, InterceptionCA.keyFileName])
    }

    @Test func createdCACarriesACriticalNameConstraintForExactlyTheInterceptedHosts() throws {
        let data = try CADirectory()
        _ = try InterceptionCA.prepare(in: data.caDirectory, hosts: Self.hosts, commonName: "Outbox interception CA (testhost)")
        let text = try OpenSSLCommand.run(["x509", "-in", data.certificateFile, "-noout", "-text"])
        #expect(text.status == 0, "\(text.output)")
        let lines = text.output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        func after(_ heading: String, _ count: Int) -> [String] {
            guard let index = lines.firstIndex(of: heading) else { return [] }
            return Array(lines[(index + 1)...].prefix(count))
        }
        #expect(after("X509v3 Name Constraints: critical", 6) == [
            "Permitted:", "DNS:api.example.com", "DNS:.svc.example.org", "IP:127.0.0.1/255.255.255.255",
            "IP:0:0:0:0:0:0:0:1/FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF", "Excluded:",
        ], "\(text.output)")
        #expect(after("Excluded:", 1) == ["DNS:.api.example.com"], "\(text.output)")
        #expect(after("X509v3 Basic Constraints: critical", 1) == ["CA:TRUE, pathlen:0"], "\(text.output)")
        #expect(after("X509v3 Key Usage: critical", 1) == ["Certificate Sign, CRL Sign"], "\(text.output)")
        #expect(lines.contains("X509v3 Subject Key Identifier:"), "\(text.output)")
        #expect(lines.contains("Public Key Algorithm: id-ecPublicKey") && lines.contains("NIST CURVE: P-256"), "\(text.output)")
        #expect(lines.contains { $0.hasPrefix("Subject: O = Outbox, CN = Outbox interception CA (testhost)") }, "\(text.output)")
    }

    @Test func createdCAIsValidForTwoYearsFromALittleInThePast() throws {
        let data = try CADirectory()
        _ = try InterceptionCA.prepare(in: data.caDirectory, hosts: Self.hosts)
        let dates = try OpenSSLCommand.run(["x509", "-in", data.certificateFile, "-noout", "-dates", "-dateopt", "iso_8601"])
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ssX"
        var parsed: [String: Date] = [:]
        for line in dates.output.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { parsed[parts[0]] = formatter.date(from: parts[1]) }
        }
        let notBefore = try #require(parsed["notBefore"], "\(dates.output)")
        let notAfter = try #require(parsed["notAfter"], "\(dates.output)")
        let ago = Date().timeIntervalSince(notBefore)
        #expect(ago > 30 * 60 && ago < 2 * 3600, "notBefore \(notBefore)")
        let days = notAfter.timeIntervalSince(Date()) / 86_400
        #expect(days > 729 && days <= 730, "notAfter \(notAfter)")
    }

    @Test func fingerprintIsOpenSSLsSHA256Fingerprint() throws {
        let data = try CADirectory()
        let authority = try InterceptionCA.prepare(in: data.caDirectory, hosts: Self.hosts)
        let printed = try OpenSSLCommand.run(["x509", "-in", data.certificateFile, "-noout", "-fingerprint", "-sha256"])
        let hex = try #require(printed.output.split(separator: "=").last)
            .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: ":", with: "").lowercased()
        #expect(hex.count == 64)
        #expect(authority.sha256Fingerprint == hex)
    }

    struct LeafCase: Sendable, CustomTestStringConvertible {
        let host: String
        /// nil: `openssl verify` accepts the leaf; else the text of its refusal.
        let refusal: String?
        var testDescription: String { "\(host) \(refusal ?? "OK")" }
    }

    @Test(arguments: [
        LeafCase(host: "api.example.com", refusal: nil),
        LeafCase(host: "a.svc.example.org", refusal: nil),
        LeafCase(host: "deep.a.svc.example.org", refusal: nil),
        LeafCase(host: "127.0.0.1", refusal: nil),
        LeafCase(host: "::1", refusal: nil),
        LeafCase(host: "example.com", refusal: "permitted subtree violation"),
        LeafCase(host: "svc.example.org", refusal: "permitted subtree violation"),
        LeafCase(host: "evil.api.example.com", refusal: "excluded subtree violation"),
        LeafCase(host: "10.0.0.1", refusal: "permitted subtree violation"),
        LeafCase(host: "::2", refusal: "permitted subtree violation"),
    ])
    func leafVerifiesInsideTheConstraintAndNotOutsideIt(_ leaf: LeafCase) throws {
        let data = try CADirectory()
        let issuer = try LeafCertificateIssuer(authority: try InterceptionCA.prepare(in: data.caDirectory, hosts: Self.hosts))
        let pem = try #require(LeafCertificateIssuer.certificatePEM(of: try issuer.context(forHost: leaf.host)))
        let verified = try OpenSSLCommand.verify(leafPEM: pem, caFile: data.certificateFile, in: data)
        if let refusal = leaf.refusal {
            #expect(verified.status != 0, "\(verified.output)")
            #expect(verified.output.contains(refusal), "\(verified.output)")
        } else {
            #expect(verified.status == 0 && verified.output.hasSuffix(": OK\n"), "\(verified.output)")
        }
    }

    @Test func leafNamesItsHostAsSubjectAltNameForServerAuthForThirtyDays() throws {
        let data = try CADirectory()
        let issuer = try LeafCertificateIssuer(authority: try InterceptionCA.prepare(in: data.caDirectory, hosts: Self.hosts))
        let leaf = data.path + "/leaf.pem"
        try Data(try #require(LeafCertificateIssuer.certificatePEM(of: try issuer.context(forHost: "API.Example.com."))))
            .write(to: URL(fileURLWithPath: leaf))
        let text = try OpenSSLCommand.run(["x509", "-in", leaf, "-noout", "-text", "-ext", "subjectAltName,extendedKeyUsage"])
        #expect(text.output.contains("DNS:api.example.com"), "\(text.output)")
        #expect(text.output.contains("TLS Web Server Authentication"), "\(text.output)")
        // Valid for 29 more days and a bit, but not for 31.
        #expect(try OpenSSLCommand.run(["x509", "-in", leaf, "-noout", "-checkend", "\(29 * 86_400)"]).status == 0)
        #expect(try OpenSSLCommand.run(["x509", "-in", leaf, "-noout", "-checkend", "\(31 * 86_400)"]).status == 1)
    }

    @Test func aWildcardForEveryHostMakesACAWithoutNameConstraints() throws {
        let data = try CADirectory()
        let issuer = try LeafCertificateIssuer(authority: try InterceptionCA.prepare(in: data.caDirectory, hosts: ["*"]))
        #expect(issuer.authority.constraints == nil)
        let text = try OpenSSLCommand.run(["x509", "-in", data.certificateFile, "-noout", "-text"])
        #expect(!text.output.contains("Name Constraints"), "\(text.output)")
        let pem = try #require(LeafCertificateIssuer.certificatePEM(of: try issuer.context(forHost: "anything.test")))
        #expect(try OpenSSLCommand.verify(leafPEM: pem, caFile: data.certificateFile, in: data).status == 0)
    }

    @Test func aSecondStartLoadsTheSameCA() throws {
        let data = try CADirectory()
        let first = try InterceptionCA.prepare(in: data.caDirectory, hosts: Self.hosts)
        let key = try data.bytes(data.keyFile)
        // Fewer hosts than the CA was made for are inside its constraint too.
        let second = try InterceptionCA.prepare(in: data.caDirectory, hosts: ["x.svc.example.org"])
        #expect(second.sha256Fingerprint == first.sha256Fingerprint)
        #expect(second.certificatePEM == first.certificatePEM)
        #expect(try data.bytes(data.keyFile) == key)
    }

    @Test(arguments: ["other.example.com", "*.example.com", "svc.example.org", "10.0.0.1", "*"])
    func aHostOutsideTheCreatedConstraintIsRefusedNamingIt(_ host: String) throws {
        let data = try CADirectory()
        _ = try InterceptionCA.prepare(in: data.caDirectory, hosts: Self.hosts)
        let before = try data.bytes(data.certificateFile)
        #expect(throws: InterceptionCAError.outsideConstraints(host: host, certificateFile: data.certificateFile)) {
            try InterceptionCA.prepare(in: data.caDirectory, hosts: ["api.example.com", host])
        }
        #expect(try data.bytes(data.certificateFile) == before, "a refused start must leave the CA alone")
    }

    @Test func replacingMakesANewKeyAndCertificateForTheCurrentHosts() throws {
        let data = try CADirectory()
        let old = try InterceptionCA.prepare(in: data.caDirectory, hosts: ["api.example.com"])
        let oldKey = try data.bytes(data.keyFile)
        let new = try InterceptionCA.prepare(in: data.caDirectory, hosts: ["other.example.com"], replacing: true)
        #expect(new.sha256Fingerprint != old.sha256Fingerprint)
        #expect(try data.bytes(data.keyFile) != oldKey)
        #expect(try data.bytes(data.certificateFile) == new.certificatePEM)
        #expect(data.mode(data.keyFile) == 0o600 && data.mode(data.certificateFile) == 0o644)
        #expect(new.constraints?.permits(pattern: "other.example.com") == true)
        #expect(new.constraints?.permits(pattern: "api.example.com") == false)
    }

    @Test func creatingNeedsAHostButLoadingDoesNot() throws {
        let data = try CADirectory()
        #expect(throws: InterceptionCAError.noHosts) { try InterceptionCA.prepare(in: data.caDirectory, hosts: []) }
        #expect(!FileManager.default.fileExists(atPath: data.certificateFile))
        let created = try InterceptionCA.prepare(in: data.caDirectory, hosts: ["api.example.com"])
        #expect(try InterceptionCA.prepare(in: data.caDirectory, hosts: []).sha256Fingerprint == created.sha256Fingerprint)
    }

    @Test func aKeyLeftWithoutItsCertificateByACrashIsReplacedByANewCA() throws {
        let data = try CADirectory()
        _ = try InterceptionCA.prepare(in: data.caDirectory, hosts: ["api.example.com"])
        let key = try data.bytes(data.keyFile)
        try FileManager.default.removeItem(atPath: data.certificateFile)
        let again = try InterceptionCA.prepare(in: data.caDirectory, hosts: ["api.example.com"])
        #expect(try data.bytes(data.keyFile) != key)
        #expect(try OpenSSLCommand.run(["x509", "-in", data.certificateFile, "-noout"]).status == 0)
        #expect(try data.bytes(data.certificateFile) == again.certificatePEM)
    }

    @Test func aCertificateWhoseKeyWasSwappedIsRefused() throws {
        let data = try CADirectory()
        _ = try InterceptionCA.prepare(in: data.caDirectory, hosts: ["api.example.com"])
        let other = try CADirectory()
        _ = try InterceptionCA.prepare(in: other.caDirectory, hosts: ["api.example.com"])
        try Data(try other.bytes(other.keyFile)).write(to: URL(fileURLWithPath: data.keyFile))
        #expect(throws: InterceptionCAError.keyMismatch(certificateFile: data.certificateFile, keyFile: data.keyFile)) {
            try InterceptionCA.prepare(in: data.caDirectory, hosts: ["api.example.com"])
        }
    }

    // MARK: A CA the configuration names

    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/tls").path

    @Test func aConfiguredCAIsLoadedAndItsOwnConstraintIsEnforced() throws {
        let ca = Self.fixtures + "/ca.pem"
        let key = Self.fixtures + "/ca-key.pem"
        let authority = try InterceptionCA.load(certificateFile: ca, keyFile: key, hosts: ["localhost", "127.0.0.1"])
        #expect(authority.certificatePEM == [UInt8](try Data(contentsOf: URL(fileURLWithPath: ca))))
        #expect(throws: InterceptionCAError.outsideConstraints(host: "api.example.com", certificateFile: ca)) {
            try InterceptionCA.load(certificateFile: ca, keyFile: key, hosts: ["localhost", "api.example.com"])
        }
    }

    @Test func aConfiguredCAThatCannotSignIsRefusedNamingTheFile() throws {
        let ca = Self.fixtures + "/ca.pem"
        let key = Self.fixtures + "/ca-key.pem"
        let leaf = Self.fixtures + "/server.pem"
        let leafKey = Self.fixtures + "/server-key.pem"
        #expect(throws: InterceptionCAError.keyMismatch(certificateFile: ca, keyFile: leafKey)) {
            try InterceptionCA.load(certificateFile: ca, keyFile: leafKey, hosts: ["localhost"])
        }
        #expect(throws: InterceptionCAError.notCA(file: leaf)) {
            try InterceptionCA.load(certificateFile: leaf, keyFile: leafKey, hosts: ["localhost"])
        }
        #expect(throws: InterceptionCAError.noCertificate(file: key)) {
            try InterceptionCA.load(certificateFile: key, keyFile: key, hosts: ["localhost"])
        }
        #expect(throws: InterceptionCAError.noKey(file: ca)) {
            try InterceptionCA.load(certificateFile: ca, keyFile: ca, hosts: ["localhost"])
        }
        #expect(throws: InterceptionCAError.unreadable(file: "/nonexistent/ca.pem", reason: "No such file or directory")) {
            try InterceptionCA.load(certificateFile: "/nonexistent/ca.pem", keyFile: key, hosts: ["localhost"])
        }
    }

    // MARK: A handshake on a minted leaf

    @Test func aClientTrustingTheCAFileCompletesAHandshakeOnTheLeafForItsSNIName() throws {
        let data = try CADirectory()
        let issuer = try LeafCertificateIssuer(authority: try InterceptionCA.prepare(in: data.caDirectory, hosts: Self.hosts))
        let client = try TLSEngine(clientOf: try TLSContext(clientVerifying: true, caFile: data.certificateFile),
                                   host: "a.svc.example.org")
        // The proxy's order: read the ClientHello, take its SNI, mint, then hand the bytes on.
        _ = client.handshake()
        let hello = client.drainOutput()
        guard case .clientHello(let serverName?) = ClientHelloPeek.inspect(hello) else {
            Issue.record("no SNI in \(ClientHelloPeek.inspect(hello))")
            return
        }
        let server = try TLSEngine(serverOf: try issuer.context(forHost: serverName))
        server.feed(hello)
        let pair = TLSPair(client: client, server: server)
        let results = pair.handshake()
        #expect(results.client == .complete && results.server == .complete, "\(results)")
        #expect(server.serverName == "a.svc.example.org")
        #expect(client.alpnProtocol == "http/1.1")
        #expect(client.write(Array("ping".utf8)) == .written)
        pair.pump()
        #expect(TLSPair.readAll(server).bytes == Array("ping".utf8))
    }

    @Test func aClientRefusesTheLeafOfAnotherName() throws {
        let data = try CADirectory()
        let issuer = try LeafCertificateIssuer(authority: try InterceptionCA.prepare(in: data.caDirectory, hosts: Self.hosts))
        let pair = TLSPair(client: try TLSEngine(clientOf: try TLSContext(clientVerifying: true, caFile: data.certificateFile),
                                                 host: "a.svc.example.org"),
                           server: try TLSEngine(serverOf: try issuer.context(forHost: "api.example.com")))
        let results = pair.handshake()
        #expect(results.client == .failed(TLSError("certificate verify failed: hostname mismatch")), "\(results)")
    }
}

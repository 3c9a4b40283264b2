import Foundation
import Glibc
import OutboxModel
import Testing

/// The interception CA through the real binary: `outbox ca` and `--force`, a start refused
/// for a host outside the CA's constraint, the TLS fields of `/admin/status`, the
/// `tls_verify_disabled` warning, and unreadable `tls` files as config errors.
@Suite("Interception CA command", .harnessThreads)
struct InterceptionCACommandTests {
    /// A data directory and a config file intercepting `hosts`.
    struct Setup {
        let directory: TemporaryDirectory
        let config: String
        var data: String { directory.file("data") }
        var certificateFile: String { data + "/ca/outbox-ca.pem" }
        var keyFile: String { data + "/ca/outbox-ca-key.pem" }

        init(hosts: [String]) throws {
            directory = try TemporaryDirectory()
            let list = hosts.map { "\"\($0)\"" }.joined(separator: ", ")
            config = try directory.write(#"{"tls": {"intercept": {"hosts": [\#(list)]}}}"#, to: "config.json")
        }

        /// The same data directory with another config.
        func rewriting(hosts: [String]) throws -> String {
            let list = hosts.map { "\"\($0)\"" }.joined(separator: ", ")
            return try directory.write(#"{"tls": {"intercept": {"hosts": [\#(list)]}}}"#, to: "config-\(UUID().uuidString).json")
        }

        func ca(_ extra: [String] = [], config: String? = nil) async throws -> ChildProcess.Observed {
            let child = try OutboxProcess.launch(["ca", "--config", config ?? self.config, "--data-dir", data] + extra)
            _ = try await child.waitForExit(timeout: .seconds(30))
            return child.observed.value
        }
    }

    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o777 : nil
    }

    static func bytes(_ path: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// The SHA-256 of the certificate's DER, from the PEM's base64 (no OpenSSL involved).
    static func derFingerprint(_ pem: [UInt8]) throws -> String {
        let body = String(decoding: pem, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let der = try #require(Data(base64Encoded: body), "not base64: \(body)")
        return SHA256.hex(of: [UInt8](der))
    }

    @Test func caPrintsTheCertificateFileItCreatedAndTheSameOneNextTime() async throws {
        let setup = try Setup(hosts: ["api.example.com", "*.svc.example.org"])
        let first = try await setup.ca()
        #expect(first.exit == .exited(0), "\(first.stderrText)")
        #expect(first.stdoutText.hasPrefix("-----BEGIN CERTIFICATE-----\n") && first.stdoutText.hasSuffix("-----END CERTIFICATE-----\n"),
                "\(first.stdoutText)")
        #expect(!first.stdoutText.contains("PRIVATE KEY") && !first.stderrText.contains("PRIVATE KEY"))
        #expect(first.stdout == (try Self.bytes(setup.certificateFile)))
        #expect(Self.mode(setup.data + "/ca") == 0o700)
        #expect(Self.mode(setup.certificateFile) == 0o644)
        #expect(Self.mode(setup.keyFile) == 0o600)
        let second = try await setup.ca()
        #expect(second.exit == .exited(0), "\(second.stderrText)")
        #expect(second.stdout == first.stdout)
    }

    @Test func caForceReplacesTheCertificateAndKey() async throws {
        let setup = try Setup(hosts: ["api.example.com"])
        let first = try await setup.ca()
        let firstKey = try Self.bytes(setup.keyFile)
        let forced = try await setup.ca(["--force"])
        #expect(forced.exit == .exited(0), "\(forced.stderrText)")
        #expect(forced.stdoutText.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(forced.stdout != first.stdout)
        #expect(forced.stdout == (try Self.bytes(setup.certificateFile)))
        #expect(try Self.bytes(setup.keyFile) != firstKey)
        #expect(Self.mode(setup.keyFile) == 0o600)
    }

    @Test func aStartWithAHostOutsideTheCAsConstraintIsRefusedUntilCaForce() async throws {
        let setup = try Setup(hosts: ["api.example.com"])
        #expect(try await setup.ca().exit == .exited(0))
        let wider = try setup.rewriting(hosts: ["api.example.com", "other.example.net"])
        let refused = try await ChildProcess.run(OutboxProcess.binaryPath, [
            "--listen", "127.0.0.1:0", "--config", wider, "--data-dir", setup.data,
        ])
        #expect(refused.exit == .exited(2), "\(refused.stderrText)")
        let lines = nonEmptyLines(refused.stderrText)
        #expect(lines.count == 1, "\(refused.stderrText)")
        #expect(lines.first?.contains("other.example.net") == true && lines.first?.contains("outbox ca --force") == true,
                "\(refused.stderrText)")
        #expect(!refused.stderrText.contains("listening"))
        // `outbox ca` refuses the same way; with --force it makes a CA for the wider config.
        let shown = try await setup.ca(config: wider)
        #expect(shown.exit == .exited(2) && shown.stderrText.contains("other.example.net"), "\(shown.stderrText)")
        #expect(try await setup.ca(["--force"], config: wider).exit == .exited(0))
        let upstream = try TestUpstream()
        let started = try await OutboxProcess.start(upstream: upstream.baseURL,
                                                    config: String(decoding: try Self.bytes(wider), as: UTF8.self),
                                                    dataDirectory: setup.data)
        #expect(try started.admin("status").status == 200, "\(started)")
    }

    @Test func statusShowsTLSVerificationAndTheInterceptedHostsWithTheCAFingerprint() async throws {
        let upstream = try TestUpstream()
        let directory = try TemporaryDirectory()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"tls": {"intercept": {"hosts": ["api.example.com", "*.svc.example.org", "127.0.0.1"]}}}
            """, dataDirectory: directory.file("data"))
        let status = try JSONObject(try outbox.admin("status"))
        #expect(status.bool("tlsVerify") == true, "\(status)")
        let interception = try #require(status.object("interception"), "\(status)")
        #expect(interception.fields["hosts"] as? [String] == ["api.example.com", "*.svc.example.org", "127.0.0.1"], "\(status)")
        let certificate = try Self.bytes(directory.file("data/ca/outbox-ca.pem"))
        #expect(interception.string("caSha256") == (try Self.derFingerprint(certificate)), "\(status)")
        try await outbox.waitForLog(containing: "interception_ca")
        #expect(!outbox.stderrText.contains("tls_verify_disabled"), "\(outbox)")
    }

    @Test func withVerifyOffStatusSaysSoAWarningIsLoggedAndNoCAIsMade() async throws {
        let upstream = try TestUpstream()
        let directory = try TemporaryDirectory()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: #"{"tls": {"verify": false}}"#,
                                                   dataDirectory: directory.file("data"))
        try await outbox.waitForLog(containing: " warn tls_verify_disabled")
        let status = try JSONObject(try outbox.admin("status"))
        #expect(status.bool("tlsVerify") == false, "\(status)")
        #expect(status.isNull("interception"), "\(status)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("data/ca")), "no host is intercepted: no CA")
    }

    @Test func caWithoutHostsToLimitANewCAToIsAConfigError() async throws {
        let setup = try Setup(hosts: [])
        let result = try await setup.ca()
        #expect(result.exit == .exited(2), "\(result.stderrText)")
        let lines = nonEmptyLines(result.stderrText)
        #expect(lines.count == 1 && lines.first?.contains("tls.intercept.hosts") == true, "\(result.stderrText)")
        #expect(result.stdout.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: setup.certificateFile))
    }

    @Test func aConfiguredCAIsPrintedAndNeverReplaced() async throws {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/tls").path
        let setup = try Setup(hosts: ["localhost"])
        let config = try setup.directory.write(#"""
            {"tls": {"intercept": {"hosts": ["localhost"], "caCertificateFile": "\#(fixtures)/ca.pem",
                                   "caKeyFile": "\#(fixtures)/ca-key.pem"}}}
            """#, to: "configured.json")
        let printed = try await setup.ca(config: config)
        #expect(printed.exit == .exited(0), "\(printed.stderrText)")
        #expect(printed.stdout == (try Self.bytes(fixtures + "/ca.pem")))
        let forced = try await setup.ca(["--force"], config: config)
        #expect(forced.exit == .exited(2), "\(forced.stderrText)")
        #expect(nonEmptyLines(forced.stderrText).count == 1 && forced.stderrText.contains("tls.intercept.caCertificateFile"),
                "\(forced.stderrText)")
        #expect(!FileManager.default.fileExists(atPath: setup.data + "/ca"))
    }

    struct UnreadableFile: Sendable, CustomTestStringConvertible {
        let key: String
        let tls: String
        var testDescription: String { key }
    }

    @Test(arguments: [
        UnreadableFile(key: "tls.caFile", tls: #"{"caFile": "MISSING"}"#),
        UnreadableFile(key: "tls.clientKeyFile", tls: #"{"clientCertificateFile": "CONFIG", "clientKeyFile": "MISSING"}"#),
        UnreadableFile(key: "tls.intercept.caCertificateFile",
                       tls: #"{"intercept": {"hosts": ["a.example"], "caCertificateFile": "MISSING", "caKeyFile": "CONFIG"}}"#),
    ], ["serve", "check-config"])
    func anUnreadableTLSFileIsAConfigErrorNamingKeyAndFile(_ file: UnreadableFile, command: String) async throws {
        let directory = try TemporaryDirectory()
        let missing = directory.file("missing.pem")
        let placeholder = directory.file("config.json")
        let config = try directory.write(#"{"tls": \#(file.tls)}"#.replacingOccurrences(of: "MISSING", with: missing)
            .replacingOccurrences(of: "CONFIG", with: placeholder), to: "config.json")
        let result = try await ChildProcess.run(OutboxProcess.binaryPath, [
            command, "--listen", "127.0.0.1:0", "--config", config, "--data-dir", directory.file("data"),
        ])
        #expect(result.exit == .exited(2), "\(result.stderrText)")
        #expect(nonEmptyLines(result.stderrText) == ["outbox: \(file.key): cannot read \(missing): No such file or directory"],
                "\(result.stderrText)")
        #expect(!looksLikeStackTrace(result.stderrText))
    }
}

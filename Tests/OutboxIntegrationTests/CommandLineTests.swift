import Foundation
import Glibc
import OutboxService
import Testing

/// The command line: help, version, check-config, the listening line, and one clear line
/// with the right exit code for every usage, config and runtime error; never a stack trace.
@Suite("Command line", .harnessThreads)
struct CommandLineTests {
    static func run(_ arguments: [String], environment: [String: String]? = nil) async throws -> ChildProcess.Observed {
        let child = try OutboxProcess.launch(arguments, environment: environment)
        _ = try await child.waitForExit(timeout: .seconds(15))
        return child.observed.value
    }

    @Test func helpPrintsUsageOnStdoutAndExitsZero() async throws {
        let result = try await Self.run(["--help"])
        #expect(result.exit == .exited(0), "\(result.stderrText)")
        #expect(result.stdoutText.lowercased().contains("usage"), "\(result.stdoutText)")
        for flag in ["--listen", "--upstream", "--config", "--data-dir", "check-config"] {
            #expect(result.stdoutText.contains(flag), "--help does not mention \(flag):\n\(result.stdoutText)")
        }
    }

    @Test func versionPrintsTheVersionAndExitsZero() async throws {
        let result = try await Self.run(["--version"])
        #expect(result.exit == .exited(0), "\(result.stderrText)")
        #expect(result.stdoutText.contains(Outbox.version), "\(result.stdoutText)")
    }

    @Test func unknownFlagExitsTwoWithOneLineNamingIt() async throws {
        let result = try await Self.run(["--bogus-flag"])
        #expect(result.exit == .exited(2))
        let lines = nonEmptyLines(result.stderrText)
        #expect(lines.count == 1, "stderr:\n\(result.stderrText)")
        #expect(lines.first?.contains("--bogus-flag") == true, "stderr:\n\(result.stderrText)")
        #expect(!looksLikeStackTrace(result.stderrText + result.stdoutText))
    }

    @Test func checkConfigPrintsTheEffectiveConfigAndExitsZero() async throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("""
            {"upstream": "http://127.0.0.1:9", "limits": {"maxHeaderBytes": 8192, "headerTimeoutSeconds": 0.25}}
            """, to: "config.json")
        let result = try await Self.run(["check-config", "--config", file])
        #expect(result.exit == .exited(0), "\(result.stderrText)")
        let object = try #require(
            try? JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any],
            "stdout is not a JSON object:\n\(result.stdoutText)")
        let limits = object["limits"] as? [String: Any]
        #expect((limits?["maxHeaderBytes"] as? NSNumber)?.intValue == 8192, "\(result.stdoutText)")
        #expect((limits?["headerTimeoutSeconds"] as? NSNumber)?.doubleValue == 0.25, "\(result.stdoutText)")
        #expect(object["upstream"] as? String == "http://127.0.0.1:9")
        // Effective means every key present, defaults filled in.
        let queue = object["queue"] as? [String: Any]
        #expect((queue?["maxBodyBytes"] as? NSNumber)?.intValue == 10_485_760, "\(result.stdoutText)")
    }

    struct InvalidConfig: Sendable, CustomTestStringConvertible {
        let json: String
        let mentions: String
        var testDescription: String { mentions }
    }

    @Test(arguments: [
        InvalidConfig(json: #"{"queue": {"maxBodyBytes": "big"}}"#, mentions: "queue.maxBodyBytes: expected integer"),
        InvalidConfig(json: #"{"limits": {"maxHeaderBytes": 1.5}}"#, mentions: "limits.maxHeaderBytes"),
        InvalidConfig(json: #"{"bogusKey": 1}"#, mentions: "bogusKey"),
        InvalidConfig(json: #"{"forwardProxy": {"connectPorts": "443"}}"#, mentions: "forwardProxy.connectPorts"),
        InvalidConfig(json: #"{"listen": "#, mentions: "config"),
    ])
    func checkConfigRejectsAnInvalidFileNamingTheKey(_ invalid: InvalidConfig) async throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write(invalid.json, to: "config.json")
        let result = try await Self.run(["check-config", "--config", file])
        #expect(result.exit == .exited(2), "stdout:\n\(result.stdoutText)\nstderr:\n\(result.stderrText)")
        let lines = nonEmptyLines(result.stderrText)
        #expect(lines.count == 1, "stderr:\n\(result.stderrText)")
        #expect(lines.first?.lowercased().contains(invalid.mentions.lowercased()) == true, "stderr:\n\(result.stderrText)")
        #expect(!looksLikeStackTrace(result.stderrText + result.stdoutText))
    }

    @Test func servePrintsTheListeningLineExactlyOnce() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let listeningLines = nonEmptyLines(outbox.stderrText).filter { $0.contains("listening") }
        #expect(listeningLines == ["outbox listening on http://127.0.0.1:\(outbox.port)"], "\(outbox)")
        #expect(!RawClient.isRefused(port: outbox.port))
    }

    @Test func portAlreadyInUseExitsOneWithOneLine() async throws {
        let busy = try LocalPort.reserve()
        let directory = try TemporaryDirectory()
        let result = try await Self.run([
            "--listen", "127.0.0.1:\(busy.port)", "--upstream", "http://127.0.0.1:9", "--data-dir", directory.file("data"),
        ])
        #expect(result.exit == .exited(1), "stderr:\n\(result.stderrText)")
        let lines = nonEmptyLines(result.stderrText)
        #expect(lines.count == 1, "stderr:\n\(result.stderrText)")
        #expect(!result.stderrText.contains("outbox listening on"))
        #expect(!looksLikeStackTrace(result.stderrText + result.stdoutText))
    }

    @Test func unusableDataDirectoryExitsOneWithOneLineNamingIt() async throws {
        let directory = try TemporaryDirectory()
        // A path below a regular file can never be created, whoever runs the test (root too).
        let blocker = try directory.write("not a directory", to: "blocker")
        let result = try await Self.run([
            "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9", "--data-dir", blocker + "/data",
        ])
        #expect(result.exit == .exited(1), "stderr:\n\(result.stderrText)")
        let lines = nonEmptyLines(result.stderrText)
        #expect(lines.count == 1 && lines.first?.contains(blocker + "/data") == true, "stderr:\n\(result.stderrText)")
        #expect(!result.stderrText.contains("outbox listening on"))
    }

    @Test func dataDirectoryIsCreatedPrivate() async throws {
        let upstream = try TestUpstream()
        let directory = try TemporaryDirectory()
        let data = directory.file("nested/data")
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, arguments: ["--data-dir", data])
        var info = stat()
        #expect(stat(data, &info) == 0, "\(outbox)")
        #expect(info.st_mode & 0o777 == 0o700, "mode \(String(info.st_mode & 0o777, radix: 8))")
    }

    /// SPEC §6: a data directory that already exists with a loose mode (a `mkdir -p` gives
    /// 0755, a volume often 0777) is made private at start, before anything is stored in it.
    @Test(arguments: [0o755 as mode_t, 0o777, 0o750])
    func anExistingLooseDataDirectoryIsMadePrivate(mode: mode_t) async throws {
        let upstream = try TestUpstream()
        let directory = try TemporaryDirectory()
        let data = directory.file("data")
        #expect(mkdir(data, 0o700) == 0 && chmod(data, mode) == 0)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, arguments: ["--data-dir", data])
        var info = stat()
        #expect(stat(data, &info) == 0, "\(outbox)")
        #expect(info.st_mode & 0o777 == 0o700, "mode \(String(info.st_mode & 0o777, radix: 8)) left as it was")
    }

    @Test func configFileFromEnvironmentIsUsedAndFlagsOverrideIt() async throws {
        let busy = try LocalPort.reserve()
        let upstream = try TestUpstream { _ in .respond(.text("from env config")) }
        let directory = try TemporaryDirectory()
        // The file's listen address is taken; the --listen flag must win over it.
        let file = try directory.write("""
            {"listen": "127.0.0.1:\(busy.port)", "upstream": "\(upstream.baseURL)", "dataDirectory": "\(directory.file("data"))"}
            """, to: "env-config.json")
        var environment = ChildProcess.cleanEnvironment()
        environment["OUTBOX_CONFIG"] = file
        let child = try OutboxProcess.launch(["--listen", "127.0.0.1:0"], environment: environment)
        let port = try await OutboxProcess.waitForListeningLine(of: child, timeout: .seconds(20))
        #expect(port != busy.port)
        let client = try RawClient(port: port)
        try client.send("GET /env HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(try client.readResponse().bodyText == "from env config", "\(child.stderrText)")
        child.signal(SIGTERM)
        #expect(try await child.waitForExit(timeout: .seconds(15)) == .exited(0), "\(child.stderrText)")
    }
}

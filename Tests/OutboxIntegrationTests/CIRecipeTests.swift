import Foundation
import Glibc
import TestPrerequisites
import Testing

/// The CI recipe of docs/ci.md run with bash as a user
/// would run it: the block after the `<!-- ci-recipe` marker, with only its `TEST_COMMAND=`
/// line replaced by a command the test chooses, the freshly built `outbox` on PATH, and the
/// settings the recipe reads from the environment (`OUTBOX_LISTEN`, `OUTBOX_UPSTREAM`,
/// `DRAIN_TIMEOUT_SECONDS`) pointing at a TestUpstream and a free port. Each run is bounded,
/// and no process the recipe started may outlive it.
@Suite("CI recipe (docs/ci.md)", .harnessThreads)
struct CIRecipeTests {
    static let bash = ChildProcess.which("bash")
    static let toolsPresent = bash != nil && ChildProcess.which("curl") != nil

    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Longer than the recipe's own bounds in these runs (30 s to start, 20 s to drain), so a
    /// recipe that hangs fails here instead of stalling the suite.
    static let runTimeout: Duration = .seconds(90)

    /// The recipe: the fenced block right after the `<!-- ci-recipe` marker line.
    static func recipe() throws -> String {
        let doc = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/ci.md"), encoding: .utf8)
        let lines = doc.split(separator: "\n", omittingEmptySubsequences: false)
        let markers = lines.indices.filter { lines[$0].hasPrefix("<!-- ci-recipe") }
        guard markers.count == 1, let marker = markers.first else {
            throw HarnessError("docs/ci.md has \(markers.count) `<!-- ci-recipe` markers; expected one")
        }
        let opening = marker + 1
        guard opening < lines.count, lines[opening].hasPrefix("```") else {
            throw HarnessError("the `<!-- ci-recipe` marker in docs/ci.md is not followed by a fenced block")
        }
        guard let closing = lines[(opening + 1)...].firstIndex(where: { $0 == "```" }) else {
            throw HarnessError("the ci-recipe block in docs/ci.md is never closed")
        }
        return lines[(opening + 1)..<closing].map { $0 + "\n" }.joined()
    }

    /// `recipe` with its one `TEST_COMMAND=` line (the placeholder a user replaces) set to
    /// `command`; every other line is left as docs/ci.md has it.
    static func replacingTestCommand(in recipe: String, with command: String) throws -> String {
        var lines = recipe.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let placeholders = lines.indices.filter { lines[$0].hasPrefix("TEST_COMMAND=") }
        guard placeholders.count == 1, let placeholder = placeholders.first else {
            throw HarnessError("the recipe in docs/ci.md has \(placeholders.count) `TEST_COMMAND=` lines; expected one")
        }
        guard !command.contains("'") else { throw HarnessError("test command must not contain a single quote: \(command)") }
        lines[placeholder] = "TEST_COMMAND='\(command)'"
        return lines.joined(separator: "\n")
    }

    /// Starts the line bash's `time` prints after the recipe ended.
    static let timeMarker = "readme-recipe-seconds="

    /// One run of the recipe in its own temporary directory.
    struct RecipeRun {
        let exit: ChildProcess.ExitStatus
        /// stdout and stderr, as a CI log would show them.
        let output: String
        /// How long the recipe ran, as bash's `time` measured it (nil if it printed nothing):
        /// a clock on the test's side would also count the time its task waited to resume.
        let seconds: Double?
    }

    /// Writes the recipe (placeholder replaced) and runs it with bash, under `time`. `TMPDIR` is `directory`,
    /// so the data directory and log the recipe creates with mktemp live (and are looked for)
    /// there. Whatever happens, processes still mentioning `directory` afterwards are killed
    /// and reported as left behind.
    static func runRecipe(testCommand: String, listen: String, upstream: String,
                          in directory: TemporaryDirectory) async throws -> RecipeRun {
        let bash = try #require(Self.bash)
        let script = try directory.write(try replacingTestCommand(in: try recipe(), with: testCommand), to: "recipe.sh")
        // A directory holding just `outbox`, whatever the built binary is called ($OUTBOX_BINARY).
        let bin = directory.file("bin")
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: bin + "/outbox", withDestinationPath: OutboxProcess.binaryPath)

        var environment = ChildProcess.cleanEnvironment()
        environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin")
        environment["TMPDIR"] = directory.path
        environment["OUTBOX_LISTEN"] = listen
        environment["OUTBOX_UPSTREAM"] = upstream
        environment["DRAIN_TIMEOUT_SECONDS"] = "20"

        let timed = #"TIMEFORMAT="\#(Self.timeMarker)%R"; time bash "$0""#
        let child = try ChildProcess(executable: bash, arguments: ["-c", timed, script], environment: environment)
        let exit: ChildProcess.ExitStatus
        do {
            exit = try await child.waitForExit(timeout: runTimeout)
        } catch {
            killProcesses(mentioning: directory.path)
            throw error
        }
        let timing = nonEmptyLines(child.stderrText).last { $0.hasPrefix(Self.timeMarker) }
        let seconds = timing.flatMap { Double($0.dropFirst(Self.timeMarker.count)) }
        let output = child.stdoutText + child.stderrText
        let leftovers = killProcesses(mentioning: directory.path)
        #expect(leftovers.isEmpty, "the recipe left processes running: \(leftovers)\n\(output)")
        return RecipeRun(exit: exit, output: output, seconds: seconds)
    }

    /// Kills (SIGKILL) every process whose command line mentions `path`, and returns their
    /// command lines: the outbox a recipe started gets `--data-dir` inside the test's directory.
    @discardableResult
    static func killProcesses(mentioning path: String) -> [String] {
        let ownPID = getpid()
        var found: [String] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), pid != ownPID,
                  let raw = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
            let commandLine = String(decoding: raw.map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
            if commandLine.contains(path) {
                kill(pid, SIGKILL)
                found.append("pid \(pid): \(commandLine)")
            }
        }
        return found
    }

    /// A client "test suite" of one POST through Outbox that passes only when it is answered
    /// `202` (stored, not forwarded); the 202's body is kept in `accepted.json`.
    static func writeClientTests(in directory: TemporaryDirectory, path: String) throws -> String {
        let accepted = directory.file("accepted.json")
        let script = try directory.write("""
            set -eu
            code=$(curl -sS -o '\(accepted)' -w '%{http_code}' -X POST -H 'Content-Type: application/json' \\
              -H 'Idempotency-Key: readme-recipe-1' -d '{"name":"readme"}' "$API_BASE_URL\(path)")
            test "$code" = 202
            """, to: "client-tests.sh")
        return "bash \(script)"
    }

    /// The body of the `202` the client tests got, as `writeClientTests` saved it.
    static func acceptedBody(in directory: TemporaryDirectory) throws -> JSONObject {
        let path = directory.file("accepted.json")
        guard let bytes = FileManager.default.contents(atPath: path) else {
            throw HarnessError("the client tests saved no response at \(path)")
        }
        return try JSONObject(parsing: Array(bytes))
    }

    @Test(.requires(toolsPresent, "needs bash and curl"))
    func aWriteQueuedWhileOfflineIsDeliveredAndTheRecipeSucceeds() async throws {
        let upstream = try TestUpstream { _ in .respond(.text(#"{"ok":true}"#, status: 201)) }
        let directory = try TemporaryDirectory()
        let testCommand = try Self.writeClientTests(in: directory, path: "/v1/items")
        let run = try await Self.runRecipe(testCommand: testCommand, listen: "127.0.0.1:\(try LocalPort.unused())",
                                           upstream: upstream.baseURL, in: directory)

        #expect(run.exit == .exited(0), "\(run.output)")
        let accepted = try Self.acceptedBody(in: directory)
        #expect(accepted.string("status") == "pending", "\(accepted)")
        // The drain returned before the recipe exited, so the delivery has happened by now.
        let writes = upstream.requests.filter { $0.method == "POST" && $0.target == "/v1/items" }
        #expect(writes.count == 1, "upstream got: \(upstream.requests)")
        let write = try #require(writes.first)
        #expect(write.bodyText == #"{"name":"readme"}"#)
        #expect(write.idempotencyKey == "readme-recipe-1", "\(write)")
        #expect(write.attempt == 1, "not a replay of the stored write: \(write)")
    }

    @Test(.requires(toolsPresent, "needs bash and curl"))
    func aWriteTheUpstreamRefusesFailsTheRecipeAndIsListed() async throws {
        let upstream = try TestUpstream { _ in .respond(.text(#"{"error":"invalid item"}"#, status: 400)) }
        let directory = try TemporaryDirectory()
        let testCommand = try Self.writeClientTests(in: directory, path: "/v1/items")
        let run = try await Self.runRecipe(testCommand: testCommand, listen: "127.0.0.1:\(try LocalPort.unused())",
                                           upstream: upstream.baseURL, in: directory)

        #expect(run.exit != .exited(0), "\(run.output)")
        let accepted = try Self.acceptedBody(in: directory)
        let id = try #require(accepted.string("id"), "\(accepted)")
        // One line names the operation: its id, its URL and that it failed (Outbox's log, also
        // printed on failure, has the id but not the URL).
        let url = "\(upstream.baseURL)/v1/items"
        #expect(nonEmptyLines(run.output).contains { $0.contains(id) && $0.contains(url) && $0.contains("failed") },
                "no line names the failed operation \(id) (\(url)):\n\(run.output)")
        // A 400 is permanent: delivered once, never retried.
        #expect(upstream.requests.count == 1, "upstream got: \(upstream.requests)")
    }

    @Test(.requires(toolsPresent, "needs bash and curl"))
    func aPortInUseFailsTheRecipeWithinItsBoundShowingOutboxsError() async throws {
        let busy = try LocalPort.reserve()
        let upstream = try TestUpstream()
        let listen = "127.0.0.1:\(busy.port)"
        // The line Outbox itself prints for this port, so the test does not restate its wording.
        let alone = try TemporaryDirectory()
        let direct = try await ChildProcess.run(OutboxProcess.binaryPath, [
            "--listen", listen, "--upstream", upstream.baseURL, "--data-dir", alone.file("data"),
        ])
        #expect(direct.exit == .exited(1), "\(direct.stderrText)")
        let errorLine = try #require(nonEmptyLines(direct.stderrText).first, "outbox printed nothing")

        let directory = try TemporaryDirectory()
        let marker = directory.file("client-tests-ran")
        let run = try await Self.runRecipe(testCommand: "touch \(marker)", listen: listen,
                                           upstream: upstream.baseURL, in: directory)

        #expect(run.exit != .exited(0), "\(run.output)")
        let seconds = try #require(run.seconds, "bash's time printed nothing:\n\(run.output)")
        #expect(seconds < 30, "took \(seconds) s, the recipe's start-up bound is 30 s:\n\(run.output)")
        #expect(run.output.contains(errorLine), "Outbox's error line \"\(errorLine)\" is not in:\n\(run.output)")
        #expect(!FileManager.default.fileExists(atPath: marker), "the client's tests ran without an Outbox")
        #expect(upstream.requests.isEmpty)
    }

    /// The workflow example's recipe step is docs/ci.md's recipe, so the copy users start
    /// from in GitHub Actions cannot drift from the one this suite runs.
    @Test func theGitHubActionsExampleRunsTheRecipeWordForWord() throws {
        let workflow = try String(contentsOf: Self.repositoryRoot.appendingPathComponent("docs/github-actions-example.yml"),
                                  encoding: .utf8)
        let lines = workflow.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let marker = try #require(lines.firstIndex { $0.trimmingCharacters(in: .whitespaces).hasPrefix("# ci-recipe") },
                                  "no `# ci-recipe` comment in docs/github-actions-example.yml")
        let run = try #require(lines[marker...].firstIndex { $0.trimmingCharacters(in: .whitespaces) == "run: |" },
                               "no `run: |` step after the ci-recipe comment")
        let block = lines[(run + 1)...]
        let indent = try #require(block.first { !$0.isEmpty }.map { $0.prefix { $0 == " " }.count })
        var script: [String] = []
        for line in block {
            if line.trimmingCharacters(in: .whitespaces).isEmpty { script.append(""); continue }
            guard line.prefix(indent).allSatisfy({ $0 == " " }) else { break }
            script.append(String(line.dropFirst(indent)))
        }
        while script.last == "" { script.removeLast() }
        let recipe = try Self.recipe()
        #expect(script.map { $0 + "\n" }.joined() == recipe,
                "docs/github-actions-example.yml's recipe step differs from docs/ci.md's recipe")
    }
}

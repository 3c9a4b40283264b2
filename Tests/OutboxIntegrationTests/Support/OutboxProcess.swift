import Foundation
import Glibc

/// The real `outbox` binary running as a child process against a test upstream, with its own
/// temporary data directory and config file. Start it with `start(...)`, which returns once the
/// proxy printed `outbox listening on http://127.0.0.1:PORT`. Killed on deinit if still running.
final class OutboxProcess: Sendable, CustomStringConvertible {
    let child: ChildProcess
    /// The port from the listening line.
    let port: UInt16
    /// Holds the data directory and config file; removed with this object.
    let directory: TemporaryDirectory

    private init(child: ChildProcess, port: UInt16, directory: TemporaryDirectory) {
        self.child = child
        self.port = port
        self.directory = directory
    }

    /// The binary under test: `$OUTBOX_BINARY`, else `outbox` next to the test runner in
    /// `.build/<triple>/debug/` (the test target depends on the executable, so it is built).
    static var binaryPath: String {
        if let explicit = ProcessInfo.processInfo.environment["OUTBOX_BINARY"], !explicit.isEmpty {
            return explicit
        }
        var runner = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        // The runner may be nested in an .xctest bundle directory; walk up to the build dir.
        for _ in 0..<4 {
            runner = runner.deletingLastPathComponent()
            let candidate = runner.appendingPathComponent("outbox").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("outbox").path
    }

    /// Runs `outbox` with exactly `arguments` (no waiting): for CLI tests.
    static func launch(_ arguments: [String], environment: [String: String]? = nil) throws -> ChildProcess {
        try ChildProcess(executable: binaryPath, arguments: arguments, environment: environment)
    }

    /// Starts `outbox --listen 127.0.0.1:0 --upstream UPSTREAM --data-dir TMP [--config TMP/config.json]`
    /// and waits for its listening line. `config` is config-file JSON text, written to a file.
    /// `dataDirectory` replaces TMP/data, so a second process can reopen a killed one's queue.
    /// `listenHost` replaces 127.0.0.1 in `--listen` (`0.0.0.0` binds every address; tests
    /// still talk to 127.0.0.1).
    /// `launcher` is a command that execs the rest of its arguments (the binary and its
    /// arguments) in its own process, so that the pid stays the binary's: see
    /// ``withOpenFileLimit(soft:hard:)``.
    /// `store` puts the queue in the test process's PostgreSQL server instead of the data
    /// directory (`TestStore`).
    static func start(upstream: String, config: String? = nil, arguments extra: [String] = [],
                      dataDirectory: String? = nil, listenHost: String = "127.0.0.1",
                      executable: String = OutboxProcess.binaryPath,
                      launcher: [String] = [], store: TestStore = .local,
                      timeout: Duration = .seconds(20)) async throws -> OutboxProcess {
        let directory = try TemporaryDirectory()
        var arguments = ["--listen", "\(listenHost):0", "--upstream", upstream,
                         "--data-dir", dataDirectory ?? directory.file("data")]
        if let config = try await store.applied(to: config) {
            arguments += ["--config", try directory.write(config, to: "config.json")]
        }
        let command = launcher + [executable] + arguments + extra
        let child = try ChildProcess(executable: command[0], arguments: Array(command.dropFirst()))
        let port = try await waitForListeningLine(of: child, timeout: timeout,
                                                  prefix: "outbox listening on http://\(listenHost):")
        let outbox = OutboxProcess(child: child, port: port, directory: directory)
        if store.isPostgres, !extra.contains("--admin-listen") {
            // A test meant for the shared store must never pass on the local one by mistake.
            let kind = try? JSONObject(outbox.send("GET", "/admin/status")).object("store")?.string("kind")
            guard kind == "postgres" || kind == nil else { throw HarnessError("asked for the postgres store, got \(kind ?? "-")\n\(outbox)") }
        }
        return outbox
    }

    /// Waits until `child` prints the listening line (the one starting with `prefix`, up to
    /// the port) and returns its port; fails at once when the child closes stderr (exits) first.
    static func waitForListeningLine(of child: ChildProcess, timeout: Duration,
                                     prefix: String = "outbox listening on http://127.0.0.1:") async throws -> UInt16 {
        let result: Result<UInt16, HarnessError> = try await child.observed.wait(
            timeout: timeout,
            describeTimeout: { observed in
                "no listening line within \(timeout); stderr so far:\n\(observed.stderrText.suffix(4000))"
            },
            until: { observed in
                if let port = listeningPort(in: observed.stderrText, prefix: prefix) { return .success(port) }
                // Waiting for stderr to close (not just the exit) keeps the last words in the message.
                if observed.stderrClosed {
                    return .failure(HarnessError(
                        "\(child.executable) ended before listening (\(observed.exit.map { "\($0)" } ?? "stderr closed")); "
                            + "stderr:\n\(observed.stderrText.suffix(4000))\nstdout:\n\(observed.stdoutText.suffix(1000))"))
                }
                return nil
            }
        )
        return try result.get()
    }

    /// Waits until a complete line of the proxy's stderr contains `text` (a log event, say);
    /// throws with the stderr so far when none does in time.
    func waitForLog(containing text: String, timeout: Duration = .seconds(10)) async throws {
        try await waitForLogLine(containing: [text], timeout: timeout)
    }

    /// Waits until a complete line of the proxy's stderr contains every one of `texts` (a log
    /// event and the id it names, say): the harness reads stderr on a thread of its own, so a
    /// line the proxy wrote before it answered may arrive after the answer.
    func waitForLogLine(containing texts: [String], timeout: Duration = .seconds(10)) async throws {
        try await waitForStderr("a line with \(texts)", timeout: timeout) { lines in
            lines.contains { line in texts.allSatisfy { line.contains($0) } }
        }
    }

    /// Waits until `condition` holds for the complete lines of the proxy's stderr so far;
    /// throws naming `what` (and showing the stderr) when it does not in time.
    func waitForStderr(_ what: String, timeout: Duration = .seconds(10),
                       until condition: @escaping @Sendable ([String]) -> Bool) async throws {
        _ = try await child.observed.wait(
            timeout: timeout,
            describeTimeout: { observed in "no \(what) in stderr within \(timeout):\n\(observed.stderrText.suffix(4000))" },
            until: { observed in condition(completeLines(observed.stderrText)) ? true : nil })
    }

    /// The port of the first complete `outbox listening on http://127.0.0.1:PORT` line (or of
    /// another listening line, given its text up to the port).
    static func listeningPort(in stderr: String, prefix: String = "outbox listening on http://127.0.0.1:") -> UInt16? {
        for text in completeLines(stderr) {
            if text.hasPrefix(prefix), let port = UInt16(text.dropFirst(prefix.count)), port != 0 {
                return port
            }
        }
        return nil
    }

    var pid: Int32 { child.pid }

    /// `http://127.0.0.1:PORT`.
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Everything the proxy wrote to stderr so far.
    var stderrText: String { child.stderrText }

    /// Whether the proxy's stderr so far contains `text`: a look without waiting, searching the
    /// bytes (no decoding of a long log into a String).
    func hasLogged(_ text: String) -> Bool {
        Data(child.observed.value.stderr).range(of: Data(text.utf8)) != nil
    }

    /// A new client connection to the proxy.
    func connect(readSize: Int = 64 * 1024) throws -> RawClient {
        try RawClient(port: port, readSize: readSize)
    }

    /// Sends one request on a fresh connection and reads the response: the common case.
    func exchange(_ request: String, method: String = "GET", timeout: Duration = .seconds(10)) throws -> HTTPResponse {
        let client = try connect()
        try client.send(request)
        return try client.readResponse(to: method, timeout: timeout)
    }

    /// The proxy's peak resident set (`VmHWM` in /proc/PID/status), in bytes.
    func peakRSSBytes() throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { throw HarnessError("no VmHWM in /proc/\(pid)/status") }
        return kilobytes * 1024
    }

    /// A `launcher` for ``start(upstream:config:arguments:dataDirectory:executable:launcher:timeout:)``
    /// that runs the binary with its open-file limit (`RLIMIT_NOFILE`) set to `soft` and `hard`:
    /// POSIX `sh`'s `ulimit`, then `exec`. The soft limit goes first, since a hard limit below
    /// the current soft one is refused.
    static func withOpenFileLimit(soft: Int, hard: Int) -> [String] {
        ["/bin/sh", "-c", #"ulimit -S -n \#(soft) && ulimit -H -n \#(hard) && exec "$0" "$@""#]
    }

    /// The CPU time the proxy has used so far, user and system (`utime` + `stime` in
    /// /proc/PID/stat), in seconds.
    func cpuSeconds() throws -> Double {
        // A process that is gone says how it ended and what it wrote last, not just ENOENT.
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else {
            throw HarnessError("no /proc/\(pid)/stat: the proxy is gone (\(child.observed.value.exit.map { "\($0)" } ?? "no exit seen yet"))\n\(self)")
        }
        // The fields after the command name, which is in parentheses and may hold spaces:
        // state is field 3, utime 14 and stime 15.
        guard let end = stat.lastIndex(of: ")") else { throw HarnessError("no command name in /proc/\(pid)/stat") }
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw HarnessError("no utime/stime in /proc/\(pid)/stat: \(stat)")
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The proxy's open-file limit now, as /proc/PID/limits shows it (numbers or `unlimited`).
    func openFileLimit() throws -> (soft: String, hard: String) {
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        guard let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }) else {
            throw HarnessError("no open-file limit in /proc/\(pid)/limits:\n\(limits)")
        }
        let values = line.dropFirst("Max open files".count).split(separator: " ")
        guard values.count >= 2 else { throw HarnessError("unreadable line in /proc/\(pid)/limits: \(line)") }
        return (String(values[0]), String(values[1]))
    }

    /// Sends `signal` (SIGTERM by default) unless it has exited.
    func terminate(signal: Int32 = SIGTERM) {
        child.signal(signal)
    }

    /// Waits for the exit (and drained output); kills it and throws on timeout.
    func waitForExit(timeout: Duration = .seconds(15)) async throws -> ChildProcess.ExitStatus {
        try await child.waitForExit(timeout: timeout)
    }

    var description: String {
        "outbox pid \(pid) on port \(port); stderr (tail):\n\(stderrText.suffix(4000))"
    }
}

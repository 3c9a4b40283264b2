import CSystem
import Foundation
import Glibc

/// A child process with its stdout and stderr drained on harness threads (a full pipe would
/// block the child) and kept for assertions and failure messages. A child still running when
/// this object goes away is killed, so no test leaves a process behind.
final class ChildProcess: Sendable {
    /// How the child ended.
    enum ExitStatus: Sendable, Equatable, CustomStringConvertible {
        case exited(Int32)
        case signaled(Int32)

        var description: String {
            switch self {
            case .exited(let code): "exit code \(code)"
            case .signaled(let signal): "killed by signal \(signal)"
            }
        }
    }

    /// Everything observed so far.
    struct Observed: Sendable {
        var stdout: [UInt8] = []
        var stderr: [UInt8] = []
        var stdoutClosed = false
        var stderrClosed = false
        var exit: ExitStatus?

        /// Exited and both pipes drained: the output is complete.
        var isFinished: Bool { exit != nil && stdoutClosed && stderrClosed }
        var stderrText: String { String(decoding: stderr, as: UTF8.self) }
        var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    }

    let pid: Int32
    let executable: String
    let observed: WaitableState<Observed>

    /// Starts `executable` (an absolute path) with `arguments`. `environment` defaults to this
    /// process's environment without proxy and `OUTBOX_*` variables, so the developer's shell
    /// cannot change what a test sees.
    ///
    /// Spawned with posix_spawn, not Foundation's `Process`: on a loaded machine `Process.run()`
    /// was seen to crash inside Foundation, to stall every other spawn behind its global lock
    /// for more than 30 s, and to report exits more than 15 s late. Here each child has its
    /// own reaper thread, gets an empty signal mask (the shutdown tests send SIGTERM, which
    /// Swift's worker threads block), inherits no descriptor but its three, and runs in a
    /// process group of its own.
    init(executable: String, arguments: [String], environment: [String: String]? = nil) throws {
        let observed = WaitableState(Observed())
        let stdout = try Self.closeOnExecPipe()
        let stderr = try Self.closeOnExecPipe()
        let variables = (environment ?? Self.cleanEnvironment()).map { "\($0.key)=\($0.value)" }
        var spawned: pid_t = 0
        var rc: Int32 = 0
        // ETXTBSY: a script this test just wrote is still open for writing in a child another
        // test spawned between its clone and its exec (close-on-exec closes it only at the
        // exec). That lasts microseconds and announces its end to nobody, so try again, a
        // bounded number of times, as Go's os/exec does.
        for attempt in 0..<100 {
            rc = Self.withCStrings([executable] + arguments) { argv in
                Self.withCStrings(variables) { envp in
                    csystem_spawn(executable, argv, envp, stdout.write, stderr.write, &spawned)
                }
            }
            guard rc == ETXTBSY, attempt < 99 else { break }
            usleep(2_000)
        }
        // The child has its copies; ours would keep the pipes open after it exits.
        close(stdout.write)
        close(stderr.write)
        guard rc == 0 else {
            close(stdout.read)
            close(stderr.read)
            throw HarnessError("cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        self.observed = observed
        self.executable = executable
        pid = spawned
        Self.drain(stdout.read, into: observed, isStderr: false)
        Self.drain(stderr.read, into: observed, isStderr: true)
        Self.reap(pid, into: observed)
    }

    /// Waits for the exit on a thread of its own and reaps the child.
    private static func reap(_ pid: Int32, into observed: WaitableState<Observed>) {
        Thread {
            var code: Int32 = 0
            var signaled: Int32 = 0
            guard csystem_wait_exit(pid, &code, &signaled) == 0 else { return }
            let status: ExitStatus = signaled != 0 ? .signaled(code) : .exited(code)
            observed.update { $0.exit = status }
        }.start()
    }

    /// A pipe whose both ends are close-on-exec from the start: tests spawn children
    /// concurrently, and a child that inherited another child's write end would hold that pipe
    /// open, so its reader would never see end of file. The spawn dup2s the write end onto the
    /// child's stdout or stderr, which clears the flag there only.
    private static func closeOnExecPipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard csystem_pipe2(&fds, O_CLOEXEC) == 0 else {
            throw HarnessError("pipe2: \(String(cString: strerror(errno)))")
        }
        return (fds[0], fds[1])
    }

    /// `strings` as a NULL-terminated array of C strings, valid during `body`.
    private static func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
        let pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        return body(pointers)
    }

    deinit {
        if observed.value.exit == nil {
            kill(pid, SIGKILL)
        }
    }

    /// The environment children get: ours, minus anything that would reroute or reconfigure them.
    static func cleanEnvironment() -> [String: String] {
        ProcessInfo.processInfo.environment.filter { key, _ in
            let lowered = key.lowercased()
            return !lowered.hasSuffix("_proxy") && !key.hasPrefix("OUTBOX_")
        }
    }

    /// The absolute path of `name` on PATH, or nil.
    static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Runs a command to completion (killing it after `timeout`) and returns how it ended.
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                    timeout: Duration = .seconds(30)) async throws -> Observed {
        let child = try ChildProcess(executable: executable, arguments: arguments, environment: environment)
        _ = try await child.waitForExit(timeout: timeout)
        return child.observed.value
    }

    /// Whether it has not exited yet.
    var isRunning: Bool { observed.value.exit == nil }

    /// Everything it wrote to stderr so far.
    var stderrText: String { observed.value.stderrText }

    /// Everything it wrote to stdout so far.
    var stdoutText: String { observed.value.stdoutText }

    /// Sends `signal` unless it has already exited.
    func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Waits for the exit and for both pipes to be drained; kills it and throws on timeout.
    func waitForExit(timeout: Duration) async throws -> ExitStatus {
        do {
            return try await observed.wait(
                timeout: timeout,
                describeTimeout: { [executable] observed in
                    "\(executable) did not exit within \(timeout) (exit: \(observed.exit.map { "\($0)" } ?? "none"), "
                        + "pipes closed: \(observed.stdoutClosed)/\(observed.stderrClosed)); stderr:\n\(observed.stderrText.suffix(4000))"
                },
                until: { $0.isFinished ? $0.exit : nil }
            )
        } catch {
            signal(SIGKILL)
            throw error
        }
    }

    private static func drain(_ fd: Int32, into observed: WaitableState<Observed>, isStderr: Bool) {
        Thread {
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                observed.update { state in
                    if isStderr {
                        state.stderr += buffer[0..<count]
                    } else {
                        state.stdout += buffer[0..<count]
                    }
                }
            }
            observed.update { state in
                if isStderr { state.stderrClosed = true } else { state.stdoutClosed = true }
            }
            close(fd)
        }.start()
    }
}

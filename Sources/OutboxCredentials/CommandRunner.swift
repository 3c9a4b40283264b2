import CSystem
import Foundation
import Glibc
import OutboxModel
import OutboxTelemetry

/// Runs a `from: "command"` rule's command (SPEC §10), as kubectl's exec credential plugins and
/// AWS's `credential_process` are run: without a shell (`posix_spawnp`), in a process group of
/// its own, with `OUTBOX_ORIGIN` in its environment and nothing on stdin; at most 64 KiB of
/// stdout is read, which must be `{"headers": {"Name": "value", …}, "expiresAt": "<RFC 3339>"}`
/// (`expiresAt` optional). Past `timeoutSeconds` the whole group is killed. Its stderr is logged
/// at `warn`, a line at a time. Every wait happens on a thread of its own, never on Swift's
/// cooperative pool.
public struct CommandRunner: Sendable {
    /// Most bytes of stdout read; more fails the run.
    public static let maxOutputBytes = 64 * 1024
    /// Most bytes of stderr kept for the log.
    static let maxErrorBytes = 8 * 1024

    public init() {}

    /// What a command gave: header values by lowercased name, and when they expire (ms since
    /// the epoch), if it said.
    public struct Produced: Sendable, Equatable {
        public var headers: [String: String]
        public var expiresAt: Int64?
    }

    /// Why a run gave nothing; its description is the operation's `lastError` after
    /// `credentials: `, and never quotes what the command printed on stdout.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
    }

    public func run(_ command: [String], origin: Origin, timeoutSeconds: Double,
                    logger: Logger) async -> Result<Produced, Failure> {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: Self.runBlocking(command, origin: origin, timeoutSeconds: timeoutSeconds, logger: logger))
            }
            thread.name = "outbox-credentials"
            thread.start()
        }
    }

    static func runBlocking(_ command: [String], origin: Origin, timeoutSeconds: Double, logger: Logger) -> Result<Produced, Failure> {
        guard let program = command.first else { return .failure(Failure(description: "no command")) }
        var output: [Int32] = [-1, -1]
        var errors: [Int32] = [-1, -1]
        // Close-on-exec from the start: a child another thread spawns meanwhile must not hold them
        // open (this command's stdout would then never end).
        guard csystem_pipe2(&output, O_CLOEXEC) == 0, csystem_pipe2(&errors, O_CLOEXEC) == 0 else {
            return .failure(Failure(description: "pipe: \(String(cString: strerror(errno)))"))
        }
        defer {
            for fd in [output[0], errors[0]] where fd >= 0 { Glibc.close(fd) }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A group of its own, so a timeout kills what it started too; the signal mask and
        // dispositions Outbox set for itself (SIGTERM blocked, SIGPIPE ignored) not inherited.
        var none = sigset_t()
        sigemptyset(&none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var environment = ProcessInfo.processInfo.environment
        environment["OUTBOX_ORIGIN"] = origin.description
        let arguments = command.map { strdup($0) } + [nil]
        let variables = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in arguments { free(pointer) }
            for pointer in variables { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, program, &actions, &attributes, arguments, variables)
        Glibc.close(output[1])
        Glibc.close(errors[1])
        guard spawned == 0 else {
            return .failure(Failure(description: "cannot run \(program): \(String(cString: strerror(spawned)))"))
        }
        var stdout: [UInt8] = []
        var stderr: [UInt8] = []
        var open = [output[0], errors[0]]
        let deadline = MonotonicClock.nanos() + UInt64(max(0, timeoutSeconds) * 1e9)
        var failure: Failure?
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while !open.isEmpty && failure == nil {
            let now = MonotonicClock.nanos()
            guard now < deadline else {
                failure = Failure(description: "the command did not finish within \(Self.seconds(timeoutSeconds)) s (killed)")
                break
            }
            var descriptors = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let wait = Int32(min(1_000, (deadline - now) / 1_000_000 + 1))
            let ready = poll(&descriptors, nfds_t(descriptors.count), wait)
            if ready < 0 && errno != EINTR {
                failure = Failure(description: "poll: \(String(cString: strerror(errno)))")
                break
            }
            for descriptor in descriptors where descriptor.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(descriptor.fd, $0.baseAddress, $0.count) }
                if count <= 0 {
                    if count == 0 || (errno != EINTR && errno != EAGAIN) { open.removeAll { $0 == descriptor.fd } }
                    continue
                }
                if descriptor.fd == output[0] {
                    stdout += buffer.prefix(count)
                    if stdout.count > Self.maxOutputBytes {
                        failure = Failure(description: "the command printed more than \(Self.maxOutputBytes / 1024) KiB on stdout (killed)")
                    }
                } else if stderr.count < Self.maxErrorBytes {
                    stderr += buffer.prefix(min(count, Self.maxErrorBytes - stderr.count))
                }
            }
        }
        if failure != nil { kill(-pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // Whatever the command left running in its group ends with it.
        kill(-pid, SIGKILL)
        for line in String(decoding: stderr, as: UTF8.self).split(whereSeparator: \.isNewline) where !line.isEmpty {
            logger.warn("credentials_command_stderr", ["origin": origin.description, "line": String(line.prefix(500))])
        }
        if let failure { return .failure(failure) }
        // WIFEXITED / WEXITSTATUS, which Glibc's module does not export.
        let signal = status & 0x7f
        if signal != 0 { return .failure(Failure(description: "the command was killed by signal \(signal)")) }
        let code = (status >> 8) & 0xff
        if code != 0 { return .failure(Failure(description: "the command exited with status \(code)")) }
        return parse(stdout)
    }

    /// The command's answer; the failure names the field that is wrong, never its value.
    static func parse(_ stdout: [UInt8]) -> Result<Produced, Failure> {
        guard let document = try? JSONReader.parse(stdout), case .object = document else {
            return .failure(Failure(description: "the command's stdout is not a JSON object"))
        }
        guard case .object(let members)? = document["headers"] else {
            return .failure(Failure(description: "headers: expected an object of header names and string values"))
        }
        var headers: [String: String] = [:]
        for (name, value) in members {
            guard let text = value.stringValue, !name.isEmpty,
                  !text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                return .failure(Failure(description: "headers.\(name): expected a string without line breaks"))
            }
            headers[name.lowercased()] = text
        }
        var expiresAt: Int64?
        if let value = document["expiresAt"], value != .null {
            guard let text = value.stringValue, let date = rfc3339(text) else {
                return .failure(Failure(description: "expiresAt: expected an RFC 3339 time"))
            }
            expiresAt = Int64((date.timeIntervalSince1970 * 1000).rounded())
        }
        return .success(Produced(headers: headers, expiresAt: expiresAt))
    }

    private static func rfc3339(_ text: String) -> Date? {
        let plain = ISO8601DateFormatter()
        if let date = plain.date(from: text) { return date }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text)
    }

    static func seconds(_ seconds: Double) -> String {
        Int(exactly: seconds).map(String.init) ?? String(seconds)
    }
}

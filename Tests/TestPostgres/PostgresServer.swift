import Foundation
import Glibc
import OutboxPostgres
import Synchronization

/// A private PostgreSQL server for the tests: `initdb` into a temporary directory (as the
/// `postgres` user when the tests run as root, since initdb and postgres refuse root), then
/// `postgres` listening on 127.0.0.1 at a free port only, fsync on, trust authentication for
/// the role `outbox`. `shared()` starts one for the test process, shared by every test that
/// asks (each works in a schema of its own); `start()` makes one of a test's own, which it may
/// restart or stop (a database that goes away under load). Every server is stopped by its pid
/// and its directory removed when the process exits.
public final class PostgresServer: Sendable {
    public let port: Int
    public let directory: String
    private let process: Mutex<(pid: pid_t, log: LogWatch)>

    public var pid: pid_t { process.withLock { $0.pid } }

    /// libpq connection parameters for the server's `postgres` database.
    public var conninfo: String { "host=127.0.0.1 port=\(port) user=outbox dbname=postgres connect_timeout=5" }

    /// The binaries of the newest PostgreSQL Debian installed (`/usr/lib/postgresql/N/bin`).
    public static let binDirectory: String? = {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return versions.reversed().map { "\(root)/\($0)/bin" }.first {
            access("\($0)/initdb", X_OK) == 0 && access("\($0)/postgres", X_OK) == 0
        }
    }()

    public static var isInstalled: Bool { binDirectory != nil }
    public static let missing = "PostgreSQL's server (Debian: apt-get install postgresql libpq-dev)"

    private static let started = Mutex<Result<PostgresServer, StartError>?>(nil)

    public struct StartError: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }

    /// The process's server, started on first use.
    public static func shared() throws -> PostgresServer {
        try started.withLock { started in
            if let started { return try started.get() }
            let result = Result { () throws(StartError) -> PostgresServer in try start() }
            started = result
            return try result.get()
        }
    }

    /// Runs `body` with the process's server on a thread of its own, never on Swift's
    /// cooperative pool: libpq calls block their thread until the answer.
    @discardableResult
    public static func onThread<T: Sendable>(_ body: @escaping @Sendable (PostgresServer) throws -> T) async throws -> T {
        try await blocking { try body(try shared()) }
    }

    /// Runs `body` on a thread of its own and returns what it returns.
    public static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let outcome: Result<T, any Error> = await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: Result { try body() }) }.start()
        }
        return try outcome.get()
    }

    /// A new empty schema, for one test: `search_path` of the connections it opens.
    public func makeSchema() throws -> String {
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let connection = try PostgresConnection(conninfo)
        defer { connection.close() }
        try connection.execute("CREATE SCHEMA \(name)")
        return name
    }

    /// `conninfo` with `search_path` set to `schema`.
    public func conninfo(schema: String) -> String { conninfo + " options='-c search_path=\(schema)'" }

    private init(port: Int, directory: String, pid: pid_t, log: LogWatch) {
        self.port = port
        self.directory = directory
        process = Mutex((pid, log))
    }

    /// A server of the caller's own (see the type's comment).
    public static func start() throws(StartError) -> PostgresServer {
        guard let bin = binDirectory else { throw StartError(description: missing) }
        var template = Array("/tmp/outbox-test-postgres.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw StartError(description: "mkdtemp: \(String(cString: strerror(errno)))") }
        let directory = String(cString: made)
        if asRoot {
            guard let user = getpwnam("postgres") else {
                throw StartError(description: "running as root, and there is no postgres user to run the server as")
            }
            guard chown(directory, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
                throw StartError(description: "chown \(directory): \(String(cString: strerror(errno)))")
            }
        }
        let (initProgram, initArguments) = command("\(bin)/initdb", ["-D", directory + "/data", "-U", "outbox", "--auth=trust",
                                                                     "-E", "UTF8", "--no-instructions", "--no-sync"])
        let initdb: (status: Int32, output: String)
        do { initdb = try run(initProgram, initArguments) } catch { throw StartError(description: "initdb: \(error)") }
        guard initdb.status == 0 else { throw StartError(description: "initdb exited \(initdb.status): \(initdb.output.suffix(500))") }
        let port = try freePort()
        let (pid, log) = try launch(bin: bin, directory: directory, port: port)
        let server = PostgresServer(port: port, directory: directory, pid: pid, log: log)
        running.withLock { _ = $0.insert(pid) }
        directories.withLock { _ = $0.insert(directory) }
        registerExitHandler()
        return server
    }

    /// Stops the server as `pg_ctl stop -m immediate` does (SIGQUIT: no checkpoint, every
    /// session cut, crash recovery at the next start), or, `immediate` false, as `-m fast`.
    public func stop(immediate: Bool = true) {
        let pid = self.pid
        Self.stop(pid: pid, signal: immediate ? SIGQUIT : SIGINT)
        Self.running.withLock { _ = $0.remove(pid) }
    }

    /// Starts the stopped server again on the same port and data, and waits until it is ready
    /// (after crash recovery, when it was stopped immediately).
    public func restart() throws(StartError) {
        guard let bin = Self.binDirectory else { throw StartError(description: Self.missing) }
        let (pid, log) = try Self.launch(bin: bin, directory: directory, port: port)
        process.withLock { $0 = (pid, log) }
        Self.running.withLock { _ = $0.insert(pid) }
    }

    private static var asRoot: Bool { getuid() == 0 }

    /// The server drops root by itself nowhere: run it as postgres with setpriv, which execs
    /// (no process in between), so the pid is the postmaster's own.
    private static func command(_ program: String, _ arguments: [String]) -> (String, [String]) {
        asRoot ? ("/usr/bin/setpriv", ["--reuid=postgres", "--regid=postgres", "--init-groups", "--", program] + arguments)
               : (program, arguments)
    }

    private static func launch(bin: String, directory: String, port: Int) throws(StartError) -> (pid_t, LogWatch) {
        let (program, arguments) = command("\(bin)/postgres", [
            "-D", directory + "/data", "-p", String(port), "-c", "listen_addresses=127.0.0.1",
            "-c", "unix_socket_directories=\(directory)", "-c", "fsync=on", "-c", "logging_collector=off",
            "-c", "max_connections=300",
        ])
        let server = Process()
        server.executableURL = URL(fileURLWithPath: program)
        server.arguments = arguments
        let output = Pipe()
        server.standardOutput = output
        server.standardError = output
        do { try server.run() } catch { throw StartError(description: "postgres: \(error)") }
        let pid = server.processIdentifier
        // The server says when it is ready; its log is read to the end (a full pipe would stall
        // it), the last lines kept for an error message.
        let log = LogWatch()
        let reader = output.fileHandleForReading
        let thread = Thread {
            var pending = ""
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                pending += String(decoding: chunk, as: UTF8.self)
                while let newline = pending.firstIndex(of: "\n") {
                    log.saw(String(pending[..<newline]))
                    pending = String(pending[pending.index(after: newline)...])
                }
            }
            log.ended()
        }
        thread.name = "postgres-log"
        thread.start()
        guard log.waitUntilReady(seconds: 60) else {
            kill(pid, SIGKILL)
            throw StartError(description: "postgres did not get ready within 60 s: \(log.lastLines)")
        }
        return (pid, log)
    }

    /// Runs `program ARGUMENTS` to its end; its exit status and what it printed.
    private static func run(_ program: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: printed, as: UTF8.self))
    }

    /// A port nothing listens on right now: bound once to port 0 and released.
    private static func freePort() throws(StartError) -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw StartError(description: "socket: \(String(cString: strerror(errno)))") }
        defer { Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw StartError(description: "bind: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Running servers by pid: stopped at exit.
    private static let running = Mutex<Set<pid_t>>([])
    /// Every server's directory, running or stopped by its test: removed at exit.
    private static let directories = Mutex<Set<String>>([])
    private static let exitHandler = Mutex(false)

    private static func registerExitHandler() {
        let first = exitHandler.withLock { registered -> Bool in
            defer { registered = true }
            return !registered
        }
        if first { atexit { PostgresServer.stopAllAtExit() } }
    }

    /// Signals `pid` and waits for it (bounded), then SIGKILL.
    private static func stop(pid: pid_t, signal: Int32) {
        kill(pid, signal)
        var status: Int32 = 0
        for _ in 0..<1000 {
            if waitpid(pid, &status, WNOHANG) == pid || (kill(pid, 0) != 0 && errno == ESRCH) { return }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
    }

    /// Fast shutdown of every server still running (SIGINT: sessions ended, a checkpoint),
    /// bounded; then every server's directory goes, also those a test stopped for good.
    private static func stopAllAtExit() {
        for pid in running.withLock({ $0 }) { stop(pid: pid, signal: SIGINT) }
        for directory in directories.withLock({ $0 }) { _ = try? FileManager.default.removeItem(atPath: directory) }
    }
}

/// The server's log lines as they arrive, and whether one of them said it is ready.
private final class LogWatch: Sendable {
    private struct State {
        var ready = false
        var ended = false
        var lines: [String] = []
    }
    private let state = Mutex(State())
    private let changed = DispatchSemaphore(value: 0)

    func saw(_ line: String) {
        state.withLock { state in
            state.lines.append(line)
            if state.lines.count > 20 { state.lines.removeFirst() }
            if line.contains("database system is ready to accept connections") { state.ready = true }
        }
        changed.signal()
    }

    func ended() {
        state.withLock { $0.ended = true }
        changed.signal()
    }

    var lastLines: String { state.withLock { $0.lines.joined(separator: " | ") } }

    /// Waits for the ready line, for the log's end (the server died), or `seconds`; looks once
    /// more after the deadline.
    func waitUntilReady(seconds: Double) -> Bool {
        let deadline = DispatchTime.now() + seconds
        while true {
            let (ready, ended) = state.withLock { ($0.ready, $0.ended) }
            if ready { return true }
            if ended { return false }
            if changed.wait(timeout: deadline) == .timedOut { return state.withLock { $0.ready } }
        }
    }
}

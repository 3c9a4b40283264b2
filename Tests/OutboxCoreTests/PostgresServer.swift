import Foundation
import Glibc
import OutboxPostgres
import Synchronization
import TestPrerequisites

/// A private PostgreSQL server for the test process: `initdb` into a temporary directory
/// (as the `postgres` user when the tests run as root, since initdb and postgres refuse root),
/// then `postgres` listening on 127.0.0.1 at a free port only, fsync on, trust authentication
/// for the role `outbox`. Started by the first test that asks, shared by every later one (each
/// works in a schema of its own), stopped by its pid and removed when the process exits.
final class PostgresServer: Sendable {
    let port: Int
    let directory: String
    let pid: pid_t

    /// libpq connection parameters for the server's `postgres` database.
    var conninfo: String { "host=127.0.0.1 port=\(port) user=outbox dbname=postgres connect_timeout=5" }

    /// The binaries of the newest PostgreSQL Debian installed (`/usr/lib/postgresql/N/bin`).
    static let binDirectory: String? = {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return versions.reversed().map { "\(root)/\($0)/bin" }.first {
            access("\($0)/initdb", X_OK) == 0 && access("\($0)/postgres", X_OK) == 0
        }
    }()

    static var isInstalled: Bool { binDirectory != nil }
    static let missing = "PostgreSQL's server (Debian: apt-get install postgresql libpq-dev)"

    private static let started = Mutex<Result<PostgresServer, StartError>?>(nil)

    struct StartError: Error, CustomStringConvertible {
        let description: String
    }

    /// The process's server, started on first use.
    static func shared() throws -> PostgresServer {
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
    static func onThread<T: Sendable>(_ body: @escaping @Sendable (PostgresServer) throws -> T) async throws -> T {
        let outcome = await ThreadResult { () -> Result<T, any Error> in Result { try body(try shared()) } }.value
        return try outcome.get()
    }

    /// A new empty schema, for one test: `search_path` of the connections it opens.
    func makeSchema() throws -> String {
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let connection = try PostgresConnection(conninfo)
        defer { connection.close() }
        try connection.execute("CREATE SCHEMA \(name)")
        return name
    }

    /// `conninfo` with `search_path` set to `schema`.
    func conninfo(schema: String) -> String { conninfo + " options='-c search_path=\(schema)'" }

    private init(port: Int, directory: String, pid: pid_t) {
        self.port = port
        self.directory = directory
        self.pid = pid
    }

    private static func start() throws(StartError) -> PostgresServer {
        guard let bin = binDirectory else { throw StartError(description: missing) }
        var template = Array("/tmp/outbox-test-postgres.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw StartError(description: "mkdtemp: \(String(cString: strerror(errno)))") }
        let directory = String(cString: made)
        let asRoot = getuid() == 0
        if asRoot {
            guard let user = getpwnam("postgres") else {
                throw StartError(description: "running as root, and there is no postgres user to run the server as")
            }
            guard chown(directory, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
                throw StartError(description: "chown \(directory): \(String(cString: strerror(errno)))")
            }
        }
        // The server drops root by itself nowhere: run it as postgres with setpriv, which execs
        // (no process in between), so the pid is the postmaster's own.
        func command(_ program: String, _ arguments: [String]) -> (String, [String]) {
            asRoot ? ("/usr/bin/setpriv", ["--reuid=postgres", "--regid=postgres", "--init-groups", "--", program] + arguments)
                   : (program, arguments)
        }
        let data = directory + "/data"
        let (initProgram, initArguments) = command("\(bin)/initdb", ["-D", data, "-U", "outbox", "--auth=trust", "-E", "UTF8",
                                                                     "--no-instructions", "--no-sync"])
        let initdb: (status: Int32, output: String)
        do { initdb = try ChildProcess.run(initProgram, initArguments) } catch { throw StartError(description: "initdb: \(error)") }
        guard initdb.status == 0 else { throw StartError(description: "initdb exited \(initdb.status): \(initdb.output.suffix(500))") }

        let port = try freePort()
        let (program, arguments) = command("\(bin)/postgres", [
            "-D", data, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=\(directory)",
            "-c", "fsync=on", "-c", "logging_collector=off", "-c", "max_connections=200",
        ])
        let server = Process()
        server.executableURL = URL(fileURLWithPath: program)
        server.arguments = arguments
        let log = Pipe()
        server.standardOutput = log
        server.standardError = log
        do { try server.run() } catch { throw StartError(description: "postgres: \(error)") }
        let pid = server.processIdentifier
        running.withLock { $0 = (pid, directory) }
        atexit { PostgresServer.stopAtExit() }

        // The server says when it is ready; its log is read to the end (a full pipe would stall
        // it), the last lines kept for an error message.
        let readiness = ReadinessWatch()
        let reader = log.fileHandleForReading
        let thread = Thread {
            var pending = ""
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                pending += String(decoding: chunk, as: UTF8.self)
                while let newline = pending.firstIndex(of: "\n") {
                    readiness.saw(String(pending[..<newline]))
                    pending = String(pending[pending.index(after: newline)...])
                }
            }
            readiness.ended()
        }
        thread.name = "postgres-log"
        thread.start()
        guard readiness.waitUntilReady(seconds: 60) else {
            kill(pid, SIGKILL)
            throw StartError(description: "postgres did not get ready within 60 s: \(readiness.lastLines)")
        }
        return PostgresServer(port: port, directory: directory, pid: pid)
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

    private static let running = Mutex<(pid: pid_t, directory: String)?>(nil)

    /// Fast shutdown (SIGINT: every session ended, a checkpoint), bounded; then SIGKILL.
    private static func stopAtExit() {
        guard let (pid, directory) = running.withLock({ $0 }) else { return }
        kill(pid, SIGINT)
        var status: Int32 = 0
        var exited = false
        for _ in 0..<300 {
            if waitpid(pid, &status, WNOHANG) == pid || (kill(pid, 0) != 0 && errno == ESRCH) { exited = true; break }
            usleep(10_000)
        }
        if !exited {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
        }
        _ = try? FileManager.default.removeItem(atPath: directory)
    }
}

/// The server's log lines as they arrive, and whether one of them said it is ready.
private final class ReadinessWatch: Sendable {
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

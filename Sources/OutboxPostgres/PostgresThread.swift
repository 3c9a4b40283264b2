import Foundation
import Synchronization

/// A thread of its own that owns one `PostgresConnection` and runs jobs on it one after the
/// other: the database's waits (connecting, commits, slow statements) block this thread and
/// nothing else, never an event loop or a thread of Swift's cooperative pool, which callers
/// reach through `run`'s continuation. The connection is opened on first use and again after
/// it broke, so a job sees either an open connection or the error of the attempt to open one.
public final class PostgresThread: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var stopped = false
    }
    private let state = Mutex(State())
    /// Set while a job runs: the connection is in use.
    private let running = Atomic<Bool>(false)

    /// Whether a job is running on the thread's connection now.
    public var isBusy: Bool { running.load(ordering: .relaxed) }
    private let ready = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private let conninfo: String
    private let timeoutSeconds: Double
    /// Run on every connection as it opens, before any job sees it (the schema's
    /// `search_path`, a statement timeout): a failure closes it and fails the job.
    private let setup: @Sendable (PostgresConnection) throws(PostgresError) -> Void
    /// Touched only on the thread (a job runs there): hence unchecked.
    private nonisolated(unsafe) var connection: PostgresConnection?

    public init(conninfo: String, timeoutSeconds: Double = 10, name: String = "outbox-postgres",
                setup: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> Void = { _ throws(PostgresError) in }) {
        self.conninfo = conninfo
        self.timeoutSeconds = timeoutSeconds
        self.setup = setup
        let thread = Thread { [self] in loop() }
        thread.name = name
        thread.start()
    }

    /// Runs `body` with the open connection on the database thread and returns what it returns.
    /// Throws the body's error, or the `PostgresError` of opening the connection.
    public func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        let result: Result<T, any Error> = await withCheckedContinuation { continuation in
            submit { opened in
                continuation.resume(returning: Result { try body(try opened.get()) })
            }
        }
        return try result.get()
    }

    /// Hands `job` the open connection on the database thread, or the error of opening it (or
    /// of the thread having stopped, then on the caller's thread). For callers that are not
    /// async: the group commit, whose completions answer clients on their own.
    public func submit(_ job: @escaping @Sendable (Result<PostgresConnection, PostgresError>) -> Void) {
        let accepted = enqueue { [self] in
            do throws(PostgresError) {
                job(.success(try open()))
            } catch {
                job(.failure(error))
            }
        }
        if !accepted { job(.failure(Self.stoppedError)) }
    }

    static let stoppedError = PostgresError(sqlState: nil, message: "the database thread is stopped")

    /// Ends the thread after the jobs already queued, closing the connection; waits for it.
    public func stop() {
        let first = state.withLock { state -> Bool in
            defer { state.stopped = true }
            return !state.stopped
        }
        guard first else { return }
        ready.signal()
        done.wait()
    }

    private func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
        let accepted = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.jobs.append(job)
            return true
        }
        if accepted { ready.signal() }
        return accepted
    }

    private func open() throws(PostgresError) -> PostgresConnection {
        if let connection, connection.isOpen { return connection }
        connection = nil
        let opened = try PostgresConnection(conninfo, timeoutSeconds: timeoutSeconds)
        do {
            try setup(opened)
        } catch {
            opened.close()
            throw error
        }
        connection = opened
        return opened
    }

    private func loop() {
        while true {
            ready.wait()
            let (jobs, stopped) = state.withLock { state -> ([@Sendable () -> Void], Bool) in
                defer { state.jobs.removeAll() }
                return (state.jobs, state.stopped)
            }
            running.store(true, ordering: .relaxed)
            for job in jobs { job() }
            running.store(false, ordering: .relaxed)
            if stopped && state.withLock({ $0.jobs.isEmpty }) { break }
        }
        connection?.close()
        connection = nil
        done.signal()
    }
}

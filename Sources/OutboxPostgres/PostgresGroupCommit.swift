import Synchronization

/// Writes from many callers gathered into shared transactions on one database thread: group
/// commit, as the local log does it with one `fdatasync` for a batch (SPEC §9). A write is a
/// few statements that must commit together; every write that arrives while a transaction is
/// on its way joins the next one, which carries them all in one pipeline between `BEGIN` and
/// `COMMIT`, so the batch waits on one WAL flush. Each write's completion runs after that
/// `COMMIT` returned, with its own statements' results: a `202` is never earlier.
///
/// A statement that fails (a constraint, a bad value) aborts the whole transaction, so a batch
/// that failed that way is run again one write per transaction, and only the write at fault
/// fails. A connection that breaks fails the writes of its batch: whether their `COMMIT`
/// reached the server is unknown, so none of them may be told it succeeded.
public final class PostgresGroupCommit: Sendable {
    public typealias Statement = (sql: String, parameters: [PostgresValue])
    public typealias Completion = @Sendable (Result<[PostgresResult], PostgresError>) -> Void

    private struct Write {
        let statements: [Statement]
        let lockOrder: String
        let completion: Completion
    }

    private struct State {
        var waiting: [Write] = []
        /// A transaction is on its way or queued on the thread: new writes wait for the next.
        var busy = false
    }

    private let state = Mutex(State())
    private let thread: PostgresThread
    private let maxStatements: Int
    private let committed: @Sendable (_ writes: Int, _ seconds: Double) -> Void

    /// Commits on `thread`, at most `maxStatements` statements per transaction (a write is never
    /// split); `committed` hears the size and duration of each transaction that committed.
    public init(thread: PostgresThread, maxStatements: Int = 1_024,
                committed: @escaping @Sendable (_ writes: Int, _ seconds: Double) -> Void = { _, _ in }) {
        self.thread = thread
        self.maxStatements = max(1, maxStatements)
        self.committed = committed
    }

    /// Commits `statements` together with whatever else is waiting, then calls `completion` on
    /// the database thread with their results in order, or with the error that stopped them.
    ///
    /// `lockOrder` names the row the write locks first (a lane): a transaction runs its writes
    /// sorted by it, keeping arrival order among equals, so two instances' transactions take
    /// the rows they share in the same order and never deadlock.
    public func write(_ statements: [Statement], lockOrder: String = "", completion: @escaping Completion) {
        let start = state.withLock { state -> Bool in
            state.waiting.append(Write(statements: statements, lockOrder: lockOrder, completion: completion))
            defer { state.busy = true }
            return !state.busy
        }
        if start { schedule() }
    }

    private func schedule() {
        thread.submit { [self] connection in
            let batch = takeBatch()
            switch connection {
            case .success(let connection): commit(batch, on: connection)
            case .failure(let error): for write in batch { write.completion(.failure(error)) }
            }
            let more = state.withLock { state -> Bool in
                state.busy = !state.waiting.isEmpty
                return state.busy
            }
            if more { schedule() }
        }
    }

    /// The writes waiting, oldest first, up to `maxStatements` statements (at least one write).
    private func takeBatch() -> [Write] {
        state.withLock { state in
            var count = 0
            var taken = 0
            for write in state.waiting {
                if taken > 0 && count + write.statements.count > maxStatements { break }
                count += write.statements.count
                taken += 1
            }
            defer { state.waiting.removeFirst(taken) }
            // Swift's sort is stable: writes of one lane keep their arrival order.
            return state.waiting.prefix(taken).sorted { $0.lockOrder < $1.lockOrder }
        }
    }

    private func commit(_ batch: [Write], on connection: PostgresConnection) {
        guard !batch.isEmpty else { return }
        let started = PostgresConnection.now()
        let statements = [("BEGIN", [])] + batch.flatMap { $0.statements.map { ($0.sql, $0.parameters) } } + [("COMMIT", [])]
        do throws(PostgresError) {
            let results = try connection.pipeline(statements)
            committed(batch.count, PostgresConnection.now() - started)
            var next = 1
            for write in batch {
                let own = Array(results[next..<next + write.statements.count])
                next += write.statements.count
                write.completion(.success(own))
            }
        } catch where batch.count > 1 && !error.isConnectionFailure {
            for write in batch { commit([write], on: connection) }
        } catch {
            for write in batch { write.completion(.failure(error)) }
        }
    }
}

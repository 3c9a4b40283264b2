import Foundation
import OutboxModel
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
/// fails. Adds (`add`) of one lane that meet in a transaction share its statements: one lock of
/// the lane, one multi-row `INSERT`, one count, one read of the keys' holders. A connection that breaks fails the writes of its batch: whether their `COMMIT`
/// reached the server is unknown, so none of them may be told it succeeded.
public final class PostgresGroupCommit: Sendable {
    public typealias Statement = (sql: String, parameters: [PostgresValue])
    public typealias Completion = @Sendable (Result<[PostgresResult], PostgresError>) -> Void
    /// An add's answer: stored as itself, or the row of the operation holding its key.
    public typealias AddCompletion = @Sendable (Result<Added, PostgresError>) -> Void

    /// What an add found once its transaction committed.
    public enum Added: Sendable {
        /// Its own row was inserted: the request, in its first state, holds its key.
        case stored
        /// The row of the operation holding its key: one stored first (by this instance or
        /// another), or its own when a neighbour in the batch was the one that found a holder.
        /// Empty when no row holds the key (a body spilled to a file that could not be read).
        case holder(PostgresResult)
    }

    /// A fenced write's answer: whether it took place (false: the claim was lost, or the
    /// operation had ended or gone).
    public typealias StateCompletion = @Sendable (Result<Bool, PostgresError>) -> Void

    private enum Work {
        case statements([Statement], Completion)
        /// One operation's add: the adds of one lane that meet in a transaction are sent as one
        /// multi-row statement set (`PostgresOperations.addMany`), not four statements each.
        case add(OperationRequest, AddCompletion)
        /// One operation's fenced state: consecutive ones share one multi-row `UPDATE`
        /// (`PostgresOperations.recordMany`).
        case state(PostgresOperations.StateWrite, StateCompletion)

        /// Made only of the store's own add and state statements.
        var isRowShaped: Bool {
            if case .statements = self { false } else { true }
        }

        var count: Int {
            switch self {
            case .statements(let statements, _): statements.count
            case .add, .state: 1
            }
        }

        func fail(_ error: PostgresError) {
            switch self {
            case .statements(_, let completion): completion(.failure(error))
            case .add(_, let completion): completion(.failure(error))
            case .state(_, let completion): completion(.failure(error))
            }
        }
    }

    private struct Write {
        let work: Work
        let lockOrder: String
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
    /// split; an add counts as one); `committed` hears the size and duration of each
    /// transaction that committed.
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
        enqueue(Write(work: .statements(statements, completion), lockOrder: lockOrder))
    }

    /// Adds `request` to the shared queue with whatever else is waiting (its lane locked first,
    /// as `PostgresOperations.add` does), then calls `completion` on the database thread with
    /// what holds its key. Only when some add of its lane's step found its key held are the
    /// holders read back (after the `COMMIT`, when the winners' rows are visible): the common
    /// add costs no read.
    public func add(_ request: OperationRequest, completion: @escaping AddCompletion) {
        enqueue(Write(work: .add(request, completion), lockOrder: PostgresOperations.lockOrder(request)))
    }

    /// Writes an operation's state under its lane's claim (`PostgresOperations.record`), with
    /// whatever else is waiting; `completion` hears whether it took place.
    public func record(_ write: PostgresOperations.StateWrite, lockOrder: String, completion: @escaping StateCompletion) {
        enqueue(Write(work: .state(write, completion), lockOrder: lockOrder))
    }

    private func enqueue(_ write: Write) {
        let start = state.withLock { state -> Bool in
            state.waiting.append(write)
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
            case .failure(let error): for write in batch { write.work.fail(error) }
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
                if taken > 0 && count + write.work.count > maxStatements { break }
                count += write.work.count
                taken += 1
            }
            defer { state.waiting.removeFirst(taken) }
            // Swift's sort is stable: writes of one lane keep their arrival order.
            return state.waiting.prefix(taken).sorted { $0.lockOrder < $1.lockOrder }
        }
    }

    /// One step of a transaction: the statements of one write, or of a run of adds of one lane.
    private enum Step {
        case statements(count: Int, Completion)
        case adds([OperationRequest], [AddCompletion])
        case states([PostgresOperations.StateWrite], [StateCompletion])
    }

    /// The batch as steps, in order: consecutive adds of one lane become one step.
    private func steps(_ batch: [Write]) -> [(Step, [Statement])] {
        var steps: [(Step, [Statement])] = []
        var index = 0
        while index < batch.count {
            switch batch[index].work {
            case .statements(let statements, let completion):
                steps.append((.statements(count: statements.count, completion), statements))
                index += 1
            case .add:
                var requests: [OperationRequest] = []
                var completions: [AddCompletion] = []
                let lane = batch[index].lockOrder
                while index < batch.count, batch[index].lockOrder == lane, case .add(let request, let completion) = batch[index].work,
                      requests.count < PostgresOperations.maxAddsPerStatement {
                    requests.append(request)
                    completions.append(completion)
                    index += 1
                }
                steps.append((.adds(requests, completions), PostgresOperations.addMany(requests)))
            case .state:
                // A run of states, none of one operation twice: one `UPDATE` applies each row once.
                var writes: [PostgresOperations.StateWrite] = []
                var completions: [StateCompletion] = []
                var ids = Set<UUID>()
                while index < batch.count, case .state(let write, let completion) = batch[index].work, !ids.contains(write.id),
                      writes.count < PostgresOperations.maxAddsPerStatement {
                    writes.append(write)
                    completions.append(completion)
                    ids.insert(write.id)
                    index += 1
                }
                steps.append((.states(writes, completions), PostgresOperations.recordMany(writes)))
            }
        }
        return steps
    }

    private func commit(_ batch: [Write], on connection: PostgresConnection) {
        guard !batch.isEmpty else { return }
        let started = PostgresConnection.now()
        let steps = steps(batch)
        // Adds and states are statements of one shape whatever their values (arrays of rows,
        // looked up by id and by their lane's key): a plan made once serves them, where the
        // connection's custom plans (for the reads, which need them) would plan each again.
        let opening: [(String, [PostgresValue])] = batch.allSatisfy(\.work.isRowShaped)
            ? PostgresConnection.beginPlannedOnce : [("BEGIN", [])]
        let statements = opening + steps.flatMap { $0.1.map { ($0.sql, $0.parameters) } } + [("COMMIT", [])]
        do throws(PostgresError) {
            let results = try connection.pipeline(statements)
            committed(batch.count, PostgresConnection.now() - started)
            var heldKeys: [([OperationRequest], [AddCompletion])] = []
            var next = opening.count
            for (step, own) in steps {
                let mine = Array(results[next..<next + own.count])
                next += own.count
                switch step {
                case .statements(_, let completion):
                    completion(.success(mine))
                case .adds(let requests, let completions):
                    // The insert answers how many rows it stored: all of them, or some keys were held.
                    if own.count == 2, let stored = mine[1].value(0, "n").flatMap({ Int($0) }), stored == requests.count {
                        for completion in completions { completion(.success(.stored)) }
                    } else {
                        heldKeys.append((requests, completions))
                    }
                case .states(let writes, let completions):
                    let changed = Set(mine[0].rows.compactMap { $0.first.flatMap { $0 } })
                    for (write, completion) in zip(writes, completions) {
                        completion(.success(changed.contains(write.id.lowercasedText)))
                    }
                }
            }
            answerHolders(heldKeys, on: connection)
        } catch where batch.count > 1 && !error.isConnectionFailure {
            for write in batch { commit([write], on: connection) }
        } catch {
            for write in batch { write.work.fail(error) }
        }
    }

    /// Reads the holders of the keys of adds whose step stored fewer rows than it had adds, and
    /// answers each with its own: committed, every winner's row is visible now.
    private func answerHolders(_ steps: [([OperationRequest], [AddCompletion])], on connection: PostgresConnection) {
        for (requests, completions) in steps {
            guard let first = requests.first else { continue }
            let read = PostgresOperations.byKeys(requests.map(\.idempotencyKey), origin: first.origin.description)
            do throws(PostgresError) {
                let holders = try connection.execute(read.sql, read.parameters)
                for (request, completion) in zip(requests, completions) {
                    completion(.success(.holder(holders.only(where: "idempotency_key", is: request.idempotencyKey))))
                }
            } catch {
                for completion in completions { completion(.failure(error)) }
            }
        }
    }
}

import Dispatch
import Foundation
import OutboxConfig
import OutboxModel
import OutboxQueue
import OutboxTelemetry
import Synchronization

/// The queue in a PostgreSQL database that every instance configured with it shares (SPEC §9):
/// the same views as the local `OutboxQueue` (the proxy's, the admin API's, the replayer's),
/// under the same rules (`QueueRules`), with the database in place of the log and its index.
///
/// Nothing of the shared queue is copied into memory but what this instance delivers: the lanes
/// it holds (`PostgresLanes`), each with the next operations it took ahead. Every other answer
/// comes from the database, on threads of the store's own (`PostgresThread`): one writes, in
/// shared transactions (`PostgresGroupCommit`: a `202` is sent after its `COMMIT`), one keeps
/// the lanes (claims, renewals, pokes, every tenth of a second), the rest read. No event loop
/// and no cooperative thread ever waits on the database; the proxy asks through
/// `QueueGateway.lookUp`, whose answer comes back later.
///
/// The database may be unreachable at start or go away later: the store then answers
/// `unavailable` (the proxy's `503 store_unavailable`), pauses delivery, reconnects with
/// backoff, and logs each change of state once. What was committed stays: nothing is ever
/// acknowledged before its `COMMIT` returned.
public final class PostgresQueue: QueueStore {
    package let reachability: Reachability
    let logger: Logger
    let metrics: Metrics
    let events: EventHub?
    let settings: Settings
    /// This instance's name in views (`instanceName`, else host and pid).
    package let instance: String
    /// The lane claims' holder: the instance's name and a token of this run, so that a restart
    /// under the same name never takes a dead run's claims for its own.
    let holder: String
    /// Where the database is, for log lines and status (never the password).
    package let target: String

    let writer: PostgresThread
    let commits: PostgresGroupCommit
    let keeperThread: PostgresThread
    let readers: [PostgresThread]
    private let readerTurn = Atomic<Int>(0)

    let health = Mutex(Health())
    let book = Mutex(LaneBook())
    let waker = Mutex<(any LaneWaker)?>(nil)
    let offline = Atomic<Bool>(false)
    /// Origins whose lanes hold unfinished work, as the keeper last read them plus what this
    /// instance stored since: which origins are probed, and where the replayer starts.
    let originsWithWorkCache = Mutex<Set<Origin>>([])
    /// The size of the shared queue as last counted, and what this instance added since:
    /// `maxOperations` is checked against it.
    let size = Mutex(QueueSize())
    /// Writes handed to the group commit and not completed: `close` waits for them.
    let writesInFlight = Atomic<Int>(0)
    let keeper = Mutex<KeeperTimer?>(nil)
    let keeperState = Mutex(KeeperState())
    /// Held while the write of an attempt's state is handed to the group commit (in flight,
    /// outcome), so that one attempt's writes reach it in the order they happened.
    let transitions = Mutex(())

    /// The config values the store reads.
    struct Settings: Sendable {
        var schema: String
        var maxOperations: Int
        var retentionSeconds: Double
        var ttlSeconds: Double
        var maxRetries: Int
        var leaseSeconds: Double
        var maxConcurrentPerOrigin: Int
    }

    /// Whether the database answers, as the last exchange with it said.
    struct Health: Sendable {
        /// The schema was found or migrated: the store can be used.
        var ready = false
        var reachable = false
        var lastError: String? = "not connected yet"
        /// A newer Outbox migrated the schema: nothing is read or written.
        var refused: String?
    }

    struct QueueSize: Sendable {
        var counted = 0
        var countedAt: Int64 = 0
        var addedSince = 0
    }

    /// Opens the store for `config`: the threads and their connections (opened as first needed),
    /// then one try at the schema within `startTimeoutSeconds`. A schema newer than this binary
    /// knows throws (exit 2 at start); a database that does not answer is no error: the store
    /// starts unavailable and the keeper keeps trying.
    package init(config: OutboxConfig, reachability: Reachability, logger: Logger, metrics: Metrics, events: EventHub? = nil,
                 startTimeoutSeconds: Double = 3) throws(PostgresSchema.SchemaError) {
        let postgres = config.queue.postgres
        let conninfo = postgres.url ?? ""
        self.reachability = reachability
        self.logger = logger
        self.metrics = metrics
        self.events = events
        settings = Settings(schema: postgres.schema, maxOperations: config.queue.maxOperations,
                            retentionSeconds: config.queue.completedRetentionSeconds, ttlSeconds: config.queue.ttlSeconds,
                            maxRetries: config.retry.maxRetries, leaseSeconds: postgres.leaseSeconds,
                            maxConcurrentPerOrigin: config.replay.maxConcurrentPerOrigin)
        instance = InstanceName.resolve(configured: postgres.instanceName)
        holder = instance + "#" + UUID().lowercasedText.prefix(8)
        target = (try? PostgresTarget(conninfo: conninfo).description) ?? "an unparsable connection string"
        let schema = postgres.schema
        let setup: @Sendable (PostgresConnection) throws(PostgresError) -> Void = { connection throws(PostgresError) in
            // Server-side bounds too: a statement stuck on a lock fails instead of holding a thread.
            _ = try connection.pipeline([("SET search_path TO \(PostgresSchema.quoted(schema))", []),
                                         ("SET statement_timeout = '\(Int(Self.statementTimeoutSeconds * 1000))ms'", []),
                                         ("SET lock_timeout = '\(Int(Self.statementTimeoutSeconds * 1000))ms'", []),
                                         // Prepared statements are planned for their values each time: a plan made
                                         // once for any value would scan `lanes`, a small table many updates make long.
                                         ("SET plan_cache_mode = force_custom_plan", [])])
        }
        let connections = max(2, postgres.maxConnections)
        writer = PostgresThread(conninfo: conninfo, timeoutSeconds: Self.clientTimeoutSeconds, name: "outbox-pg-write", setup: setup)
        keeperThread = PostgresThread(conninfo: conninfo, timeoutSeconds: Self.clientTimeoutSeconds, name: "outbox-pg-lanes",
                                      setup: setup)
        readers = (2..<connections).map { number in
            PostgresThread(conninfo: conninfo, timeoutSeconds: Self.clientTimeoutSeconds, name: "outbox-pg-read-\(number - 1)",
                           setup: setup)
        }
        let metrics = self.metrics
        commits = PostgresGroupCommit(thread: writer, committed: { writes, seconds in
            metrics.storeCommitted(operations: writes, seconds: seconds)
        })
        // One try now, bounded: a schema only a newer Outbox reads stops the start (exit 2);
        // a database that is down does not.
        let first = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<Void, PostgresSchema.SchemaError>?>(nil)
        keeperThread.submit { [self] connection in
            // A refusal now is the start's one line (exit 2), not a log line before it.
            outcome.withLock { $0 = migrate(connection, logRefusal: false) }
            first.signal()
        }
        if first.wait(timeout: .now() + startTimeoutSeconds) == .success, case .failure(.newer(let schema, let found, let known)) = outcome.withLock({ $0 }) {
            shutDownThreads()
            throw .newer(schema: schema, found: found, known: known)
        }
        reachability.setHasStoredWork { [self] origin in originsWithWorkCache.withLock { $0.contains(origin) } }
        startKeeper()
    }

    /// The longest a statement may run on the server, and the client's own bound on a wait.
    static let statementTimeoutSeconds: Double = 10
    static let clientTimeoutSeconds: Double = 15

    /// Creates or migrates the schema on `connection`; records the outcome in `health`.
    func migrate(_ connection: Result<PostgresConnection, PostgresError>,
                 logRefusal: Bool = true) -> Result<Void, PostgresSchema.SchemaError> {
        let result: Result<Void, PostgresSchema.SchemaError>
        switch connection {
        case .failure(let error):
            result = .failure(.database(error))
        case .success(let connection):
            do throws(PostgresSchema.SchemaError) {
                let migrated = try PostgresSchema.migrate(connection, schema: settings.schema)
                if migrated.from != migrated.to {
                    logger.info("store_migrated", ["schema": settings.schema, "from": String(migrated.from), "to": String(migrated.to)])
                }
                // The statements of this connection ran before the schema existed: set its path again.
                _ = try? connection.execute("SET search_path TO \(PostgresSchema.quoted(settings.schema))")
                result = .success(())
            } catch {
                result = .failure(error)
            }
        }
        switch result {
        case .success:
            health.withLock { $0.ready = true }
            noteSuccess()
        case .failure(.newer(let schema, let found, let known)):
            let message = PostgresSchema.SchemaError.newer(schema: schema, found: found, known: known).description
            let first = health.withLock { health -> Bool in
                defer { health.refused = message }
                return health.refused == nil
            }
            if first && logRefusal { logger.error("store_schema_newer", ["error": message]) }
        case .failure(.database(let error)):
            noteFailure(error)
        case .failure(let error):
            noteFailure(PostgresError(sqlState: nil, message: "\(error)"))
        }
        return result
    }

    // MARK: Health

    /// Why the store cannot be used now; nil when it can.
    var unavailableReason: String? {
        health.withLock { health in
            if let refused = health.refused { return refused }
            if !health.ready || !health.reachable { return "database \(target): \(health.lastError ?? "not connected")" }
            return nil
        }
    }

    /// An exchange with the database succeeded: logged once when it had not.
    func noteSuccess() {
        let cameBack = health.withLock { health -> Bool in
            defer {
                health.reachable = true
                health.lastError = nil
            }
            return !health.reachable
        }
        if cameBack {
            logger.info("store_available", ["store": "postgres", "database": target, "schema": settings.schema])
            kickEverything()
        }
    }

    /// An exchange failed: a broken connection makes the store unreachable (logged once); a
    /// statement's own failure (a constraint, out of space) says nothing about reachability.
    func noteFailure(_ error: PostgresError) {
        metrics.storeFailed(kind: Self.failureKind(error))
        guard error.isConnectionFailure || error.sqlState == "57014" || error.sqlState == "55P03" else { return }
        let wentAway = health.withLock { health -> Bool in
            defer {
                health.reachable = false
                health.lastError = error.description
            }
            return health.reachable || health.lastError == "not connected yet"
        }
        if wentAway {
            logger.warn("store_unavailable", ["store": "postgres", "database": target, "error": error.description])
        }
    }

    /// The kind of a store error, as the metric counts them.
    static func failureKind(_ error: PostgresError) -> String {
        if error.isConnectionFailure { return "connection" }
        if error.isOutOfSpace { return "out_of_space" }
        switch error.sqlState {
        case "57014": return "timeout"
        case "55P03", "40P01", "40001": return "conflict"
        default: return "statement"
        }
    }

    /// What an enqueue's failure tells its client: out of space is `507`, the database gone is
    /// `503 store_unavailable`, anything else a storage failure (`507`).
    static func enqueueError(_ error: PostgresError) -> EnqueueError {
        if error.isOutOfSpace { return .full("the database is out of space (\(error))") }
        if error.isConnectionFailure || error.sqlState == "57014" || error.sqlState == "55P03" {
            return .unavailable("the database did not answer (\(error))")
        }
        return .storage("\(error)")
    }

    // MARK: Threads

    /// A reader thread, in turn.
    func reader() -> PostgresThread {
        guard !readers.isEmpty else { return keeperThread }
        let turn = readerTurn.wrappingAdd(1, ordering: .relaxed).oldValue
        return readers[turn % readers.count]
    }

    /// Runs `body` on a reader's connection and returns its value, or the error that stopped it
    /// (also when the store is unavailable, without asking the database).
    func read<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> T) async -> Result<T, PostgresError> {
        // While the database is away only the keeper asks it (with backoff): a request fails
        // at once instead of waiting for a connection that is refused.
        await withCheckedContinuation { continuation in
            read(body) { continuation.resume(returning: $0) }
        }
    }

    /// `read` for callers that are not async: `completion` runs on the reader's thread.
    func read<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws(PostgresError) -> T,
                           completion: @escaping @Sendable (Result<T, PostgresError>) -> Void) {
        if let reason = unavailableReason {
            completion(.failure(PostgresError(sqlState: nil, message: reason)))
            return
        }
        let thread = reader()
        thread.submit { [self] connection in
            let result = Self.run(body, on: connection)
            // A connection the server dropped (it restarted) is found broken only when used:
            // a read is safe to ask again, once, on the fresh connection the thread opens.
            if case .failure(let error) = result, error.isConnectionFailure, case .success = connection {
                thread.submit { [self] again in
                    let retried = Self.run(body, on: again)
                    record(retried)
                    completion(retried)
                }
                return
            }
            record(result)
            completion(result)
        }
    }

    private static func run<T>(_ body: (PostgresConnection) throws(PostgresError) -> T,
                               on connection: Result<PostgresConnection, PostgresError>) -> Result<T, PostgresError> {
        switch connection {
        case .failure(let error): .failure(error)
        case .success(let connection): Result { () throws(PostgresError) in try body(connection) }
        }
    }

    /// Commits `statements` with whatever else is waiting (group commit); `completion` runs
    /// after the `COMMIT` on the writer's thread, with the statements' results.
    func write(_ statements: [PostgresGroupCommit.Statement], lane: LaneID? = nil,
               completion: @escaping @Sendable (Result<[PostgresResult], PostgresError>) -> Void) {
        if let reason = unavailableReason {
            completion(.failure(PostgresError(sqlState: nil, message: reason)))
            return
        }
        writesInFlight.wrappingAdd(1, ordering: .relaxed)
        commits.write(statements, lockOrder: lane.map { $0.origin + "\u{0}" + $0.lane } ?? "") { [self] result in
            record(result)
            completion(result)
            writesInFlight.wrappingSubtract(1, ordering: .releasing)
        }
    }

    /// Adds `request` through the group commit (the adds of a lane share their statements);
    /// `completion` runs after the `COMMIT` with what holds its key.
    func add(_ request: OperationRequest, completion: @escaping PostgresGroupCommit.AddCompletion) {
        if let reason = unavailableReason {
            completion(.failure(PostgresError(sqlState: nil, message: reason)))
            return
        }
        writesInFlight.wrappingAdd(1, ordering: .relaxed)
        commits.add(request) { [self] result in
            record(result)
            completion(result)
            writesInFlight.wrappingSubtract(1, ordering: .releasing)
        }
    }

    /// Writes an operation's state under its lane's claim through the group commit (consecutive
    /// ones share one statement); `completion` hears whether it took place.
    func record(_ id: UUID, _ state: OperationState, priority: OperationPriority, claim: LaneClaim, lane: LaneID,
                completion: @escaping @Sendable (Result<Bool, PostgresError>) -> Void) {
        if let reason = unavailableReason {
            completion(.failure(PostgresError(sqlState: nil, message: reason)))
            return
        }
        writesInFlight.wrappingAdd(1, ordering: .relaxed)
        let write = PostgresOperations.StateWrite(id: id, state: state, priority: priority, instance: instance, holder: holder,
                                                  fence: claim.fence)
        commits.record(write, lockOrder: lane.origin + "\u{0}" + lane.lane) { [self] result in
            record(result)
            completion(result)
            writesInFlight.wrappingSubtract(1, ordering: .releasing)
        }
    }

    /// `write`, awaited.
    func write(_ statements: [PostgresGroupCommit.Statement], lane: LaneID? = nil) async -> Result<[PostgresResult], PostgresError> {
        await withCheckedContinuation { continuation in
            write(statements, lane: lane) { continuation.resume(returning: $0) }
        }
    }

    private func record<T>(_ result: Result<T, PostgresError>) {
        switch result {
        case .success: noteSuccess()
        case .failure(let error): noteFailure(error)
        }
    }

    private func shutDownThreads() {
        writer.stop()
        keeperThread.stop()
        for reader in readers { reader.stop() }
    }

    // MARK: Life cycle

    package func attach(_ replayer: any LaneWaker) {
        waker.withLock { $0 = replayer }
        reachability.setOnOnline { [self] origin in
            // Its lanes may be claimed now; the replayer looks once they are.
            requestKeeperTick()
            Task { await replayer.kick(origin) }
        }
        Task { await replayer.startAll() }
    }

    /// Writes what is on its way, gives back what this instance took ahead and never sent, lets
    /// its lanes go, and closes the connections (SIGTERM). The replayer has stopped by now.
    package func close() {
        keeper.withLock { timer in
            timer?.source.cancel()
            timer = nil
        }
        // The outcomes of the last attempts are on their way to the group commit: wait for them
        // (bounded, as the rest of the stop is).
        let deadline = MonotonicClock.nanos() + UInt64(Self.clientTimeoutSeconds * 1e9)
        while writesInFlight.load(ordering: .acquiring) > 0 && MonotonicClock.nanos() < deadline {
            usleep(2_000)
        }
        let released = DispatchSemaphore(value: 0)
        keeperThread.submit { [self] connection in
            if case .success(let connection) = connection { releaseAll(on: connection) }
            released.signal()
        }
        _ = released.wait(timeout: .now() + Self.clientTimeoutSeconds)
        shutDownThreads()
    }

    /// Wakes every lane this instance knows of (the store is back, or a flush).
    func kickEverything() {
        requestKeeperTick()
        if let waker = waker.withLock({ $0 }) { Task { await waker.kickAll() } }
    }

    func kick(_ origins: some Sequence<Origin>) {
        guard let waker = waker.withLock({ $0 }) else { return }
        let origins = Array(origins)
        guard !origins.isEmpty else { return }
        Task { for origin in origins { await waker.kick(origin) } }
    }

    // MARK: Events

    func announce(_ id: UUID, _ state: OperationState, origin: Origin, orderingKey: String?) {
        events?.publish(.operation(OperationEvent(id: id, status: state.status.rawValue, retryCount: state.retryCount,
                                                  lastError: state.lastError, origin: origin, orderingKey: orderingKey)))
    }

    func announceRemoved(_ id: UUID, retryCount: Int, lastError: String?, origin: Origin, orderingKey: String?) {
        events?.publish(.operation(OperationEvent(id: id, status: "removed", retryCount: retryCount, lastError: lastError,
                                                  origin: origin, orderingKey: orderingKey)))
    }
}

/// A lane of the shared queue: its origin's text and its ordering key, `""` for the default.
struct LaneID: Hashable, Sendable {
    let origin: String
    let lane: String

    init(origin: String, lane: String) {
        self.origin = origin
        self.lane = lane
    }

    init(_ origin: Origin, orderingKey: String?) {
        self.init(origin: origin.description, lane: orderingKey ?? "")
    }

    var orderingKey: String? { lane.isEmpty ? nil : lane }
}

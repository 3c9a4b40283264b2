import Foundation
import OutboxConfig
import OutboxModel
import OutboxStorage
import OutboxTelemetry
import Synchronization

/// Where an operation's records are in the log: the `created` record (request, body) and
/// the latest `updated` record (state, stored response).
public struct StoredAt: Sendable, Equatable {
    public var created: RecordLocation
    public var state: RecordLocation?
}

/// The durable queue: the log on disk, the index in memory, and the rules that join them.
/// Every change is written to the log first and applied to the index only
/// after its fdatasync, so the index never shows what a crash could lose.
///
/// The index sits behind a `Mutex` rather than in an actor: the event loops ask it
/// synchronous questions on every queueable request (is this key known? is this origin's lane
/// busy?), and a hop to an actor there would cost more than the answer.
public final class OutboxQueue: Sendable {
    private let log: OperationLog
    private let index: Mutex<QueueIndex<StoredAt>>
    /// Keys whose `created` record is being written: a second request with the same key waits
    /// for the first instead of storing a duplicate.
    private let reserving = Mutex<[String: [(fingerprint: [UInt8], completion: @Sendable (Result<QueuedOperationInfo, EnqueueError>) -> Void)]]>([:])
    private let drainWaiters = Mutex<[UUID: CheckedContinuation<Bool, Never>]>([:])
    private let offline = Atomic<Bool>(false)
    /// States applied by `recordSoon` whose records are not on disk yet, with their responses:
    /// readers see them until the record (and its location) takes over.
    private let unwritten = Mutex<[UUID: (serial: UInt64, state: OperationState)]>([:])
    private let serials = Atomic<UInt64>(0)
    package let reachability: Reachability
    private let replayer = Mutex<(any LaneWaker)?>(nil)
    private let logger: Logger
    private let maxOperations: Int
    private let retentionSeconds: Double
    private let ttlSeconds: Double
    public let maxRetries: Int

    /// Opens (and recovers) the log in `config.dataDirectory` and rebuilds the index.
    let metrics: Metrics

    package init(config: OutboxConfig, reachability: Reachability, logger: Logger, metrics: Metrics) throws(StorageError) {
        // The index is built straight from the records as recovery reads them, in log order:
        // no list of recovered operations ever exists beside it.
        var index = QueueIndex<StoredAt>()
        let log = try OperationLog.open(directory: config.dataDirectory, logger: logger) { event in
            switch event {
            case .created(let summary, var state, let location):
                // At-least-once: an operation in flight when the process died is sent again.
                if state.status == .inProgress { state.status = .pending }
                do {
                    try index.insert(id: summary.id, origin: summary.origin, idempotencyKey: summary.idempotencyKey,
                                     priority: summary.priority, tag: summary.tag, dependsOn: summary.dependsOn,
                                     createdAt: summary.createdAt, state: state,
                                     locator: StoredAt(created: location, state: nil))
                } catch {
                    logger.warn("recovery_skipped", ["id": summary.id.lowercasedText, "error": "\(error)"])
                }
            case .updated(let id, var state, let location):
                guard let entry = index.entry(id) else { return }
                if state.status == .inProgress { state.status = .pending }
                try? index.update(id, state: state, locator: StoredAt(created: entry.locator.created, state: location))
            case .deleted(let id):
                index.remove(id)
            }
        }
        self.log = log
        self.metrics = metrics
        self.index = Mutex(index)
        self.reachability = reachability
        self.logger = logger
        maxOperations = config.queue.maxOperations
        retentionSeconds = config.queue.completedRetentionSeconds
        ttlSeconds = config.queue.ttlSeconds
        maxRetries = config.retry.maxRetries
        for origin in index.knownOrigins { reachability.register(origin) }
        logger.debug("queue_opened", ["operations": String(index.count), "pending": String(index.count(of: .pending)),
                                     "directory": config.dataDirectory])
    }

    /// Connects the replayer (built after the server, which owns the event loops it sends on).
    package func attach(_ replayer: any LaneWaker) {
        self.replayer.withLock { $0 = replayer }
        reachability.setOnOnline { origin in Task { await replayer.kick(origin) } }
        Task { await replayer.startAll() }
    }

    private func wake(_ origins: [Origin]) {
        guard !origins.isEmpty, let replayer = replayer.withLock({ $0 }) else { return }
        Task { for origin in origins { await replayer.kick(origin) } }
    }

    /// Writes what is pending and stops the writer (SIGTERM).
    public func close() {
        log.close()
    }

    /// Removes completed operations past retention and expires old unfinished ones. Called
    /// periodically by `main`'s maintenance task.
    package func maintain(now: Int64 = WallClock.millis()) async {
        defer { compactIfDue(now: now) }
        let (retired, expired) = index.withLock {
            ($0.retentionExpired(now: now, retentionSeconds: retentionSeconds), $0.expired(now: now, ttlSeconds: ttlSeconds))
        }
        if !retired.isEmpty {
            let removed = await delete(retired)
            logger.info("retention_removed", ["operations": String(removed)])
        }
        for id in expired {
            guard let entry = index.withLock({ $0.entry(id) }), entry.status == .pending else { continue }
            if let state = ReplayTransition.expire(current: currentState(entry), createdAt: entry.createdAt, now: now, ttlSeconds: ttlSeconds) {
                await record(id, state)
            }
        }
    }

    private let lastCompaction = Atomic<Int64>(0)
    private static let compactionIntervalMillis: Int64 = 30_000

    /// Every 30 s: rewrites or removes sealed segments whose operations are gone, then points
    /// the index at the moved records (only where it still points into the same segment: a
    /// state written meanwhile lives in a newer one and wins).
    private func compactIfDue(now: Int64) {
        guard now - lastCompaction.load(ordering: .relaxed) >= Self.compactionIntervalMillis else { return }
        lastCompaction.store(now, ordering: .relaxed)
        let moved: [UUID: OperationLog.CompactedLocations]
        do {
            moved = try log.compact { id in
                index.withLock { $0.entry(id).map { (created: $0.locator.created, state: $0.locator.state) } }
            }
        } catch {
            logger.warn("storage_compaction_failed", ["error": "\(error)"])
            return
        }
        guard !moved.isEmpty else { return }
        index.withLock { index in
            for (id, locations) in moved {
                guard let entry = index.entry(id) else { continue }
                var locator = entry.locator
                if locator.created.segment == locations.created.segment { locator.created = locations.created }
                if let state = locations.state, locator.state?.segment == state.segment { locator.state = state }
                try? index.update(id, state: currentState(entry), locator: locator)
            }
        }
    }

    @discardableResult
    package func delete(_ id: UUID) async -> Bool {
        guard index.withLock({ $0.entry(id) }) != nil else { return false }
        do {
            _ = try await log.append(.deleted(id))
        } catch {
            logger.warn("storage_failed", ["operation": "delete", "error": "\(error)"])
            return false
        }
        let woken = index.withLock { index -> [Origin] in
            index.remove(id)
            return index.takeLanesToWake()
        }
        wake(woken)
        notifyDrainWaiters()
        return true
    }

    /// Deletes many at once: the appends run concurrently, so one group commit covers them.
    private func delete(_ ids: [UUID]) async -> Int {
        await withTaskGroup(of: Bool.self) { group in
            for id in ids { group.addTask { await self.delete(id) } }
            var removed = 0
            for await done in group where done { removed += 1 }
            return removed
        }
    }

    private func entries(where include: (QueueIndex<StoredAt>.Entry) -> Bool,
                         status: OperationStatus? = nil) -> [QueueIndex<StoredAt>.Entry] {
        index.withLock { index in
            index.list(QueueIndex<StoredAt>.Filter(status: status), limit: Int.max).entries.filter(include)
        }
    }

    private func currentState(_ entry: QueueIndex<StoredAt>.Entry) -> OperationState {
        OperationState(status: entry.status, retryCount: entry.retryCount, lastAttemptAt: entry.lastAttemptAt,
                       nextAttemptAt: entry.nextAttemptAt, lastError: entry.lastError)
    }

    private func info(_ entry: QueueIndex<StoredAt>.Entry) -> QueuedOperationInfo? {
        guard let request = try? log.readRequest(at: entry.locator.created) else { return nil }
        return QueuedOperationInfo(id: entry.id, status: entry.status, idempotencyKey: entry.idempotencyKey,
                                   fingerprint: request.fingerprint, createdAt: entry.createdAt)
    }

    // MARK: Drain

    private func notifyDrainWaiters() {
        let busy = index.withLock { $0.count(of: .pending) + $0.count(of: .inProgress) }
        guard busy == 0 else { return }
        let waiters = drainWaiters.withLock { map -> [CheckedContinuation<Bool, Never>] in
            defer { map.removeAll() }
            return Array(map.values)
        }
        for waiter in waiters { waiter.resume(returning: true) }
    }
}

// MARK: - The proxy's view

extension OutboxQueue: QueueGateway {
    package var forcedOffline: Bool { offline.load(ordering: .relaxed) }

    /// `PUT /admin/connectivity`: true = offline (queue everything, replay nothing).
    public func setForcedOffline(_ value: Bool) {
        offline.store(value, ordering: .relaxed)
        if !value, let replayer = replayer.withLock({ $0 }) { Task { await replayer.kickAll() } }
    }

    package func hasQueued(_ origin: Origin) -> Bool {
        index.withLock { $0.hasQueued(origin: origin) }
    }

    package func operation(withKey idempotencyKey: String) -> QueuedOperationInfo? {
        guard let entry = index.withLock({ $0.entry(forKey: idempotencyKey) }) else { return nil }
        return info(entry)
    }

    package func completedResponse(of id: UUID) -> StoredResponse? {
        if let pending = unwritten.withLock({ $0[id]?.state }) { return pending.response }
        guard let location = index.withLock({ $0.entry(id)?.locator.state }) else { return nil }
        return (try? log.readState(at: location))?.response
    }

    package func resolveDependency(_ reference: String) -> UUID? {
        index.withLock { index in
            if let id = UUID(uuidString: reference), index.entry(id) != nil { return id }
            return index.entry(forKey: reference)?.id
        }
    }

    package func enqueue(_ request: OperationRequest, completion: @escaping @Sendable (Result<QueuedOperationInfo, EnqueueError>) -> Void) {
        let count = index.withLock { $0.count }
        guard count < maxOperations else {
            completion(.failure(.full("queue.maxOperations (\(maxOperations)) reached")))
            return
        }
        // One writer per key: later requests with the key wait for the first one's outcome.
        let first = reserving.withLock { map -> Bool in
            if map[request.idempotencyKey] != nil {
                map[request.idempotencyKey]?.append((request.fingerprint, completion))
                return false
            }
            map[request.idempotencyKey] = []
            return true
        }
        guard first else { return }
        let state = OperationState()
        log.append(.created(request, state)) { [self] result in
            let outcome: Result<QueuedOperationInfo, EnqueueError>
            switch result {
            case .success(let location):
                let woken = index.withLock { index -> [Origin] in
                    try? index.insert(request, state: state, locator: StoredAt(created: location, state: nil))
                    return index.takeLanesToWake()
                }
                metrics.enqueued()
                outcome = .success(QueuedOperationInfo(id: request.id, status: .pending, idempotencyKey: request.idempotencyKey,
                                                       fingerprint: request.fingerprint, createdAt: request.createdAt))
                wake(woken + [request.origin])
            case .failure(.full):
                outcome = .failure(.full("the disk is full"))
            case .failure(let error):
                logger.error("storage_failed", ["operation": "enqueue", "error": "\(error)"])
                outcome = .failure(.storage("\(error)"))
            }
            completion(outcome)
            let waiting = reserving.withLock { $0.removeValue(forKey: request.idempotencyKey) ?? [] }
            for waiter in waiting {
                switch outcome {
                case .success(let info): waiter.completion(waiter.fingerprint == info.fingerprint ? .success(info) : .failure(.keyConflict))
                case .failure: waiter.completion(outcome)
                }
            }
        }
    }

    package func originUnreachable(_ origin: Origin, reason: String) {
        reachability.markOffline(origin, reason: reason)
    }

    package func originAnswered(_ origin: Origin) {
        reachability.markOnline(origin)
    }

    package func isOnline(_ origin: Origin) -> Bool {
        reachability.isOnline(origin)
    }
}

// MARK: - The replayer's view

extension OutboxQueue: ReplaySource {
    package func nextWork(for origin: Origin, now: Int64) -> ReplayWork {
        let (step, failing) = index.withLock { index -> (LaneStep, [QueueIndex<StoredAt>.Entry]) in
            let step = index.nextReady(origin: origin, now: now)
            return (step, step.dependencyFailed.compactMap { index.entry($0) })
        }
        if let dependent = failing.first {
            return .failDependent(dependent.id, currentState(dependent))
        }
        switch step.next {
        case .deliver(let id):
            guard let entry = index.withLock({ $0.entry(id) }) else { return .idle }
            guard let request = try? log.readRequest(at: entry.locator.created) else {
                // A compaction moved it a moment ago: the index is about to point at the copy.
                return .wait(until: now + 50)
            }
            return .attempt(id, request, currentState(entry))
        case .wait(let until): return .wait(until: until)
        case .busy, .idle: return .idle
        }
    }

    package func record(_ id: UUID, _ state: OperationState) async {
        let location: RecordLocation
        do {
            location = try await log.append(.updated(id, state))
        } catch {
            logger.error("storage_failed", ["operation": "update", "error": "\(error)"])
            return
        }
        let woken = index.withLock { index -> [Origin] in
            guard let entry = index.entry(id) else { return [] }
            try? index.update(id, state: state, locator: StoredAt(created: entry.locator.created, state: location))
            return index.takeLanesToWake()
        }
        wake(woken)
        if state.status.isFinished { notifyDrainWaiters() }
    }

    package func recordSoon(_ id: UUID, _ state: OperationState) {
        let serial = serials.wrappingAdd(1, ordering: .relaxed).newValue
        unwritten.withLock { $0[id] = (serial, state) }
        let woken = index.withLock { index -> [Origin] in
            try? index.update(id, state: state)
            return index.takeLanesToWake()
        }
        wake(woken)
        log.append(.updated(id, state)) { [self] result in
            switch result {
            case .success(let location):
                // Later states of the same operation are appended (and complete) after this
                // one, so the last completion to run carries the newest location.
                index.withLock { index in
                    guard let entry = index.entry(id) else { return }
                    var locator = entry.locator
                    locator.state = location
                    try? index.update(id, state: currentState(entry), locator: locator)
                }
                unwritten.withLock { map in
                    if map[id]?.serial == serial { map.removeValue(forKey: id) }
                }
            case .failure(let error):
                logger.error("storage_failed", ["operation": "update", "error": "\(error)"])
            }
        }
        if state.status.isFinished { notifyDrainWaiters() }
    }

    package var originsWithWork: [Origin] {
        index.withLock { index in index.knownOrigins.filter { index.hasQueued(origin: $0) } }
    }
}

// MARK: - The admin API's view

extension OutboxQueue: AdminQueueSource {
    package var connectivityMode: String { forcedOffline ? "offline" : "auto" }

    package var counts: [OperationStatus: Int] {
        index.withLock { index in
            Dictionary(uniqueKeysWithValues: OperationStatus.allCases.map { ($0, index.count(of: $0)) })
        }
    }

    package var oldestPendingAgeSeconds: Double? {
        guard let oldest = index.withLock({ $0.oldestUnfinishedCreatedAt }) else { return nil }
        return max(0, Double(WallClock.millis() - oldest) / 1000)
    }

    package var origins: [OriginStatus] { reachability.statuses }

    package var storageBytes: Int { log.diskBytes }

    package func unfinishedCount(origin: Origin) -> Int {
        index.withLock { $0.count(of: .pending, origin: origin) + $0.count(of: .inProgress, origin: origin) }
    }

    package func list(status: OperationStatus?, tag: String?, origin: String?, after: UUID?, limit: Int) -> (items: [OperationSnapshot], next: UUID?) {
        let originValue = origin.flatMap { Origin.parseAbsolute($0 + "/")?.0 }
        if origin != nil && originValue == nil { return ([], nil) }
        let filter = QueueIndex<StoredAt>.Filter(status: status, tag: tag, origin: originValue)
        let page: QueueIndex<StoredAt>.Page? = index.withLock { index in
            if let after { return index.list(filter, after: after, limit: limit) }
            return index.list(filter, limit: limit)
        }
        guard let page else { return ([], nil) }
        // Method and target live in the created record: one read per listed operation.
        let items = page.entries.map { entry in
            let request = try? log.readRequest(at: entry.locator.created)
            return snapshot(entry, method: request?.method ?? "", target: request?.target ?? "")
        }
        return (items, page.next == nil ? nil : items.last?.id)
    }

    private func snapshot(_ entry: QueueIndex<StoredAt>.Entry, state: OperationState? = nil, method: String = "", target: String = "") -> OperationSnapshot {
        OperationSnapshot(id: entry.id, origin: entry.origin, method: method, target: target, idempotencyKey: entry.idempotencyKey,
                          priority: entry.priority, tag: entry.tag, dependsOn: entry.dependsOn, createdAt: entry.createdAt,
                          state: state ?? currentState(entry))
    }

    package func detail(_ id: UUID) -> (OperationSnapshot, OperationRequest)? {
        guard let entry = index.withLock({ $0.entry(id) }) else { return nil }
        let request: OperationRequest
        do {
            request = try log.readRequest(at: entry.locator.created)
        } catch {
            logger.warn("storage_read_failed", ["id": id.lowercasedText, "error": "\(error)"])
            return nil
        }
        var state = currentState(entry)
        if let pending = unwritten.withLock({ $0[id]?.state }) {
            state.response = pending.response
            state.conflict = pending.conflict
        } else if let location = entry.locator.state, let stored = try? log.readState(at: location) {
            state.response = stored.response
            state.conflict = stored.conflict
        }
        return (snapshot(entry, state: state, method: request.method, target: request.target), request)
    }

    package func retry(_ id: UUID) async -> Result<OperationSnapshot, AdminRefusal> {
        guard let entry = index.withLock({ $0.entry(id) }) else { return .failure(.notFound) }
        guard entry.status == .failed || entry.status == .conflict || entry.status == .pending else {
            return .failure(.notRetryable(entry.status))
        }
        // A fresh start (status pending, retryCount 0, error and conflict cleared): an admin retry
        // grants the whole retry budget again, due now.
        await record(id, OperationState(status: .pending))
        wake([entry.origin])
        guard let (snapshot, _) = detail(id) else { return .failure(.notFound) }
        return .success(snapshot)
    }

    package func deleteAll(status: OperationStatus?) async -> Int {
        await delete(entries(where: { _ in true }, status: status).map(\.id))
    }

    package func prune(createdBefore cutoff: Int64) async -> Int {
        await delete(entries(where: { $0.createdAt < cutoff }).map(\.id))
    }

    package func flush() {
        // Backoff lives in the index only as nextAttemptAt: clearing it makes every lane due.
        let woken = index.withLock { index -> [Origin] in
            let waiting = index.list(QueueIndex<StoredAt>.Filter(status: .pending), limit: Int.max).entries
            for entry in waiting where entry.nextAttemptAt != nil {
                var state = currentState(entry)
                state.nextAttemptAt = nil
                try? index.update(entry.id, state: state)
            }
            return index.knownOrigins
        }
        wake(woken)
        if let replayer = replayer.withLock({ $0 }) { Task { await replayer.kickAll() } }
    }

    package func waitUntilDrained(timeoutSeconds: Double) async -> Bool {
        let token = UUID()
        return await withCheckedContinuation { continuation in
            let busy = index.withLock { $0.count(of: .pending) + $0.count(of: .inProgress) }
            if busy == 0 {
                continuation.resume(returning: true)
                return
            }
            drainWaiters.withLock { $0[token] = continuation }
            // Re-check: the last operation may have finished between the count and the insert.
            notifyDrainWaiters()
            Task {
                try? await Task.sleep(nanoseconds: UInt64(timeoutSeconds * 1e9))
                drainWaiters.withLock { $0.removeValue(forKey: token) }?.resume(returning: false)
            }
        }
    }
}

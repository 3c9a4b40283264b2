import Foundation
import OutboxConfig
import OutboxModel
import OutboxStorage
import OutboxTelemetry
import Synchronization

/// The durable queue: the log on disk, the index in memory, and the rules that join them.
/// Every change is written to the log first and applied to the index only
/// after its fdatasync, so the index never shows what a crash could lose.
///
/// The index sits behind a `Mutex` rather than in an actor: the event loops ask it
/// synchronous questions on every queueable request (is this key known? is this origin's lane
/// busy?), and a hop to an actor there would cost more than the answer.
public final class OutboxQueue: Sendable {
    private let log: OperationLog
    private let index: CountedIndex
    /// Keys (of an origin) whose `created` record is being written: a second request with the
    /// same key to the same origin waits for the first instead of storing a duplicate.
    private let reserving = Mutex<[ScopedKey: [(fingerprint: [UInt8], completion: @Sendable (Result<OperationSnapshot, EnqueueError>) -> Void)]]>([:])
    /// An idempotency key as it is unique: within one origin (SPEC §4).
    private struct ScopedKey: Hashable, Sendable {
        var origin: Origin
        var key: String
    }
    private let drainWaiters = Mutex<[UUID: CheckedContinuation<Bool, Never>]>([:])
    private let offline = Atomic<Bool>(false)
    /// States applied by `recordSoon` whose records are not on disk yet, with their responses:
    /// readers see them until the record (and its location) takes over.
    private let unwritten = Mutex<[UUID: (serial: UInt64, state: OperationState)]>([:])
    private let serials = Atomic<UInt64>(0)
    /// Requests read ahead (`readAhead(after:)`) for the operation a lane delivers next, taken
    /// by `takeWork`. A stored request never changes, so an entry cannot go stale; one whose
    /// operation went elsewhere (deleted, overtaken) is only memory, and the map is emptied
    /// when it reaches `readAheadLimit`.
    private let readAhead = Mutex<[UUID: OperationRequest]>([:])
    private static let readAheadLimit = 64
    /// Larger requests are not read ahead: the map stays a few MiB at most, and for a large
    /// body the read is a small part of the exchange anyway.
    private static let readAheadMaxBytes: UInt32 = 64 * 1024
    package let reachability: Reachability
    /// What waits on the attempts taken and not ended; taken only inside the index's lock (so a
    /// removal and a lane's next pick see the same state), never the other way round.
    private let book = Mutex(AttemptBook())
    /// Large bodies enter the log's buffer a few at a time (see `LargeAppendGate`).
    private let largeAppends = LargeAppendGate()
    private let replayer = Mutex<(any LaneWaker)?>(nil)
    private let logger: Logger
    private let maxOperations: Int
    private let retentionSeconds: Double
    private let ttlSeconds: Double
    public let maxRetries: Int
    /// This instance's name, shown as the `instance` of the operations it attempted.
    private let instance: String

    /// Opens (and recovers) the log in `config.dataDirectory` and rebuilds the index.
    let metrics: Metrics
    /// Where every change of an operation is announced (`event: operation`), and the switch.
    private let events: EventHub?

    package init(config: OutboxConfig, reachability: Reachability, logger: Logger, metrics: Metrics,
                 events: EventHub? = nil, logOptions: OperationLog.Options = .init()) throws(StorageError) {
        self.events = events
        // The index is built straight from the records as recovery reads them, in log order:
        // no list of recovered operations ever exists beside it.
        var index = QueueIndex<OperationRecords>()
        var options = logOptions
        options.counters = metrics.groupCommit
        // Bytes of each segment that no operation needs any more, as the records replay: what
        // compaction starts from (see `discard(_:)`).
        var dead: [UInt32: Int] = [:]
        func discard(_ location: RecordLocation?) {
            if let location { dead[location.segment, default: 0] += Int(location.length) }
        }
        index.reserveRecords(Self.recordReservation(maxOperations: config.queue.maxOperations))
        let log = try OperationLog.open(directory: config.dataDirectory, options: options, logger: logger, reserve: { records in
            index.reserveCapacity(Self.reservation(expecting: records, maxOperations: config.queue.maxOperations))
        }, prepare: Self.prepare) { record in
            switch record {
            case .created(let restored, let location):
                do {
                    try index.restore(restored, locator: OperationRecords(created: location, state: nil))
                } catch {
                    // The first record holding an id or key wins, as it did when this one was
                    // appended (its enqueue answered with an error, never 202).
                    logger.warn("recovery_skipped", ["id": restored.id.lowercasedText, "error": "\(error)"])
                    discard(location)
                }
            case .updated(let id, let state, let location):
                // An update of an id that is not indexed belongs to an operation deleted before
                // it, or never indexed: neither exists any more, and neither does the record.
                var superseded: RecordLocation?
                if index.restoreState(id, state, relocate: { superseded = $0.state; $0.state = location }) {
                    discard(superseded)
                } else {
                    discard(location)
                }
            case .deleted(let id):
                // The delete record itself stays needed: it cancels a `created` record that
                // may sit in a segment compaction leaves alone.
                if let removed = index.restoreRemoval(id) {
                    discard(removed.created)
                    discard(removed.state)
                }
            }
        }
        log.discard(bytesBySegment: dead)
        index.finishRestoring()
        self.log = log
        self.metrics = metrics
        self.index = CountedIndex(index)
        self.reachability = reachability
        self.logger = logger
        maxOperations = config.queue.maxOperations
        retentionSeconds = config.queue.completedRetentionSeconds
        ttlSeconds = config.queue.ttlSeconds
        maxRetries = config.retry.maxRetries
        instance = InstanceName.resolve(configured: config.queue.postgres.instanceName)
        for origin in index.knownOrigins { reachability.register(origin) }
        // Only origins holding work are probed; the others are tried by the next request.
        let counted = self.index
        reachability.setHasStoredWork { origin in counted.withLock { $0.hasQueued(origin: origin) } }
        logger.debug("queue_opened", ["operations": String(index.count), "pending": String(index.count(of: .pending)),
                                     "directory": config.dataDirectory])
    }

    /// A recovery record as the index takes it, made on recovery's reading threads.
    private enum RecoveredRecord: Sendable {
        case created(QueueIndex<OperationRecords>.Insertion, RecordLocation)
        case updated(UUID, QueueIndex<OperationRecords>.IndexedState, RecordLocation)
        case deleted(UUID)
    }

    /// What can be done to a record before it meets the index, in parallel: copying out only
    /// the fields the index keeps, parsing and hashing the key, and making an operation that
    /// was in flight when the process died pending again (at-least-once: it is sent again).
    private static func prepare(_ record: borrowing RecoveryRecord) -> RecoveredRecord {
        switch record.kind {
        case .created:
            let restored = QueueIndex<OperationRecords>.Insertion(
                id: record.id, idempotencyKey: record.idempotencyKey, origin: record.originChanged ? record.origin : nil,
                priority: record.priority, tag: record.tag.map { String(decoding: $0, as: UTF8.self) },
                dependsOn: record.dependsOn, createdAt: record.createdAt,
                orderingKey: record.orderingKey.map { String(decoding: $0, as: UTF8.self) }, state: restoredState(record))
            return .created(restored, record.location)
        case .updated:
            return .updated(record.id, restoredState(record), record.location)
        case .deleted:
            return .deleted(record.id)
        }
    }

    /// An operation in progress when the process stopped (its latest record is the mark of an
    /// attempt that may have been sent) is pending again, attempted (it has a `lastAttemptAt`,
    /// so it stays its lane's head), and its next attempt is numbered past the marked one.
    private static func restoredState(_ record: borrowing RecoveryRecord) -> QueueIndex<OperationRecords>.IndexedState {
        QueueIndex.IndexedState(status: record.status == .inProgress ? .pending : record.status, retryCount: record.retryCount,
                                 lastAttemptAt: record.lastAttemptAt,
                                 nextAttemptAt: record.nextAttemptAt,
                                 lastError: record.lastError.map { String(decoding: $0, as: UTF8.self) }, attempts: record.attempts)
    }

    /// Room to reserve in the index for an estimated `records` at startup: never more than the
    /// queue may hold, plus a margin, because a table one short of its contents doubles (a copy
    /// of every record, twice the memory at the peak). The queue can hold a few more than
    /// `maxOperations` (appends in flight when the limit is reached), and the estimate is off
    /// when the first record is longer than the average one.
    static func reservation(expecting records: Int, maxOperations: Int) -> Int {
        let expected = min(records, maxOperations)
        return expected + expected / 32 + 1024
    }

    /// Operations whose index records are reserved up front, untouched (see
    /// `QueueIndex.reserveRecords`): as many as the queue may hold, plus the margin of
    /// `reservation`, so the records never move. At most 2^21 (256 MiB of address space): a
    /// queue allowed more grows by doubling past that, and an allocation larger than the
    /// machine's memory could be refused where the kernel checks overcommit.
    static func recordReservation(maxOperations: Int) -> Int {
        min(reservation(expecting: maxOperations, maxOperations: maxOperations), 1 << 21)
    }

    /// Connects the replayer (built after the server, which owns the event loops it sends on).
    package func attach(_ replayer: any LaneWaker) {
        self.replayer.withLock { $0 = replayer }
        reachability.setOnOnline { origin in Task { await replayer.kick(origin) } }
        Task { await replayer.startAll() }
    }

    /// Origins to kick that no kick task has taken yet.
    private let kicksDue = Mutex<Set<Origin>>([])

    /// Kicks the origins' lanes. A group commit completes dozens of enqueues at once: they
    /// share one task, which takes every origin added before it runs, instead of one task and
    /// one replayer hop each.
    private func wake(_ origins: [Origin]) {
        guard !origins.isEmpty, let replayer = replayer.withLock({ $0 }) else { return }
        let first = kicksDue.withLock { due -> Bool in
            let wasEmpty = due.isEmpty
            due.formUnion(origins)
            return wasEmpty
        }
        guard first else { return }
        Task {
            let due = kicksDue.withLock { due -> Set<Origin> in
                defer { due.removeAll() }
                return due
            }
            for origin in due { await replayer.kick(origin) }
        }
    }

    /// Writes what is pending and stops the writer (SIGTERM). Attempts marked ahead and never
    /// started are given back first (the replayer has stopped taking any), so that after the
    /// restart they carry the numbers they would have carried.
    public func close() {
        index.withLock { index in
            for entry in index.releaseMarks() {
                var state = fullState(of: entry)
                state.status = .pending
                let serial = holdUnwritten(entry.id, state)
                append(entry.id, state, serial: serial, deferred: true, written: {})
            }
        }
        log.close()
    }

    package func maintain() async {
        await maintain(now: WallClock.millis())
    }

    /// Removes completed operations past retention and expires old unfinished ones. Called
    /// periodically by `main`'s maintenance task.
    package func maintain(now: Int64) async {
        defer { compactIfDue(now: now) }
        reachability.forgetIdle()
        let (retired, expired) = index.withLock {
            ($0.retentionExpired(now: now, retentionSeconds: retentionSeconds), $0.expired(now: now, ttlSeconds: ttlSeconds))
        }
        if !retired.isEmpty {
            var removed = 0
            for start in stride(from: 0, to: retired.count, by: Self.removalBatch) {
                let ids = retired[start..<min(start + Self.removalBatch, retired.count)]
                // Still completed as its removal begins: one retried meanwhile stays.
                let step = await remove { index in ids.compactMap { index.beginRemoval($0, where: { $0.status == .completed }) } }
                removed += step.removed
                if !step.written { break }
            }
            logger.info("retention_removed", ["operations": String(removed)])
        }
        for id in expired {
            guard let entry = index.withLock({ $0.entry(id) }), entry.status == .pending else { continue }
            if let state = ReplayTransition.expire(current: entry.state, createdAt: entry.createdAt, now: now, ttlSeconds: ttlSeconds) {
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
                Self.apply(entry.state, locator: locator, of: id, to: &index, logger: logger)
            }
        }
    }

    @discardableResult
    package func delete(_ id: UUID) async -> Bool {
        await remove { index in index.beginRemoval(id).map { [$0] } ?? [] }.removed == 1
    }

    /// Operations removed per step of a bulk delete, prune or retention sweep: one group commit
    /// of their `deleted` records and two holds of the index's lock each, so a million removals
    /// cost a thousand steps and hold a thousand entries at a time, never a task or a list of
    /// everything.
    static let removalBatch = 1000

    /// An operation whose removal has begun (``QueueIndex/beginRemoval(_:where:)``), and the
    /// cancellation of its attempt when it was in flight.
    private typealias Removal = (entry: QueueIndex<OperationRecords>.Entry, inFlight: CallCancellation?)

    /// Removes, as one step, the operations that `begin` starts removing (at most
    /// ``removalBatch``), and returns how many went and whether every record was written. `begin`
    /// runs under the lock the lanes' next picks take, so each operation leaves its lane in the
    /// same step as it is chosen, and from then on nothing sends it; one in flight has its
    /// attempt cancelled (its exchange closed) and keeps its lane busy until it is gone. Then
    /// the `deleted` records are appended together (one group commit; one completion shared by
    /// all of them, no closure per record); the operations whose records are on disk leave the
    /// index under one lock and are announced, and those whose records could not be written go
    /// back to their lanes. `removed` counts only what this step removed: an operation another
    /// removal had begun is not begun again, so it is never counted twice.
    private func remove(beginning begin: (inout QueueIndex<OperationRecords>) -> [Removal]) async -> (removed: Int, written: Bool) {
        let (begun, cancelled) = index.withLock { index -> ([QueueIndex<OperationRecords>.Entry], [CallCancellation]) in
            let removals = begin(&index)
            let begun = removals.map(\.entry)
            // A taken attempt waiting for its mark hears the removal too.
            let waiting = book.withLock { book in book.marks.isEmpty ? [] : begun.compactMap { book.marks.removeValue(forKey: $0.id) } }
            for mark in waiting { mark.settle(written: false) }
            return (begun, removals.compactMap(\.inFlight))
        }
        for cancellation in cancelled { cancellation.cancel(.removed) }
        guard !begun.isEmpty else { return (0, true) }
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<RemovalWrites.Outcome, Never>) in
            let writes = RemovalWrites(count: begun.count) { continuation.resume(returning: $0) }
            let done: @Sendable (Result<RecordLocation, StorageError>) -> Void = { writes.done($0) }
            for entry in begun { log.append(.deleted(entry.id), completion: done) }
        }
        if let failure = outcome.failure {
            logger.warn("storage_failed", ["operation": "delete", "operations": String(begun.count),
                                           "id": begun[0].id.lowercasedText, "error": "\(failure)"])
        }
        let woken = index.withLock { index -> [Origin] in
            for (position, entry) in begun.enumerated() {
                if outcome.written[position] {
                    if let gone = index.remove(entry.id) { discard(gone.locator) }
                } else {
                    index.abortRemoval(entry.id)
                }
            }
            return index.takeLanesToWake()
        }
        var removed = 0
        for (position, entry) in begun.enumerated() where outcome.written[position] {
            announce(entry, status: "removed")
            removed += 1
        }
        wake(woken)
        notifyDrainWaiters()
        return (removed, outcome.failure == nil)
    }

    /// Removes the operations that match `filter` and `include` when it starts (ones created
    /// meanwhile are left alone), in queue order, ``removalBatch`` at a time; returns how many
    /// it removed. Each page is read and its removals begun under one hold of the lock, so the
    /// status a page was chosen by is the status its removals begin with (one taken for
    /// delivery since is in flight, and a bulk delete by status leaves it), and the event
    /// loops' lookups wait for one page at most; it stops at the first step whose records
    /// could not be written.
    private func removeAll(_ filter: QueueIndex<OperationRecords>.Filter,
                           where include: (QueueIndex<OperationRecords>.Entry) -> Bool) async -> Int {
        let end = index.withLock { $0.nextSequence }
        var cursor: UInt64?
        var removed = 0
        while true {
            var next: UInt64?
            let step = await remove { index in
                let page = index.list(filter, afterSequence: cursor, limit: Self.removalBatch)
                next = page.next.flatMap { $0 < end ? $0 : nil }
                return page.entries.compactMap { entry in
                    guard entry.sequence < end, include(entry) else { return nil }
                    return index.beginRemoval(entry.id)
                }
            }
            removed += step.removed
            guard step.written, let next else { return removed }
            cursor = next
        }
    }

    /// The operation as the index has it, with what only its `created` record holds (method,
    /// target, fingerprint; left empty when `request` is nil) and `state` in place of the index's.
    private func snapshot(_ entry: QueueIndex<OperationRecords>.Entry, request: OperationRequest?,
                          state: OperationState? = nil) -> OperationSnapshot {
        OperationSnapshot(id: entry.id, origin: entry.origin, method: request?.method ?? "", target: request?.target ?? "",
                          idempotencyKey: entry.idempotencyKey, fingerprint: request?.fingerprint ?? [],
                          priority: entry.priority, tag: entry.tag, dependsOn: entry.dependsOn, createdAt: entry.createdAt,
                          orderingKey: entry.orderingKey, state: state ?? entry.state)
            .attempted(by: instance)
    }

    /// What the proxy answers a repeated key with: the fingerprint and the credential digest
    /// live in the `created` record and the response of a completed operation in its latest
    /// state, both read from disk.
    private func keyHolder(_ entry: QueueIndex<OperationRecords>.Entry) throws(QueueReadError) -> OperationSnapshot {
        var request = try read(entry.id) { () throws(StorageError) in try log.readRequest(at: entry.locator.created) }.get()
        request.fingerprint = IdempotencyKey.fingerprint(of: request)
        var state = entry.state
        if entry.status == .completed {
            state.response = try latestBodies(of: entry).response
        }
        var holder = snapshot(entry, request: request, state: state)
        holder.credentials = IdempotencyKey.credentials(of: request)
        return holder
    }

    /// The entry's latest state in full (its whole `lastError`, any bodies), to be written again
    /// with a change: the one on its way to disk, else the stored one, when either is the state
    /// the index holds; else the index's own. A pending operation never holds a response or a
    /// conflict (an attempt that stores one finishes it), so unless its error was cut, the
    /// index's state is whole and nothing is read: a flush of many lanes stays in memory.
    private func fullState(of entry: QueueIndex<OperationRecords>.Entry) -> OperationState {
        if entry.status == .pending, (entry.lastError?.count ?? 0) < QueueIndex<OperationRecords>.maxErrorLength {
            return entry.state
        }
        return (try? latestState(of: entry).current) ?? entry.state
    }

    /// The response and conflict bodies of the entry's latest state, which the index does not
    /// hold: from `unwritten` while that state's record is being appended, else from the record.
    /// The index's state and locator can be a step apart (a state reaches the index before its
    /// record is on disk, and leaves `unwritten` only once the locator points at it), so a
    /// record or pending state whose status and retry count differ from the entry's means a
    /// newer state was on its way: look again. The window is microseconds wide; a few looks
    /// close it, and the last one answers with what it found.
    private func latestBodies(of first: QueueIndex<OperationRecords>.Entry) throws(QueueReadError)
        -> (response: StoredResponse?, conflict: StoredResponse?) {
        // An attempt in flight has no bodies (its state is written only as its mark), and neither
        // has a pending operation: an attempt that stores one finishes it.
        if first.status == .inProgress || first.status == .pending { return (nil, nil) }
        var entry = first
        var found: OperationState?
        for _ in 0..<4 {
            let look = try latestState(of: entry)
            if let current = look.current { return (current.response, current.conflict) }
            found = look.stored ?? found
            guard let fresh = index.withLock({ $0.entry(entry.id) }) else { break }
            entry = fresh
        }
        return (found?.response, found?.conflict)
    }

    /// One look for the entry's state in full, without the index's lock (a caller may hold it):
    /// the state on its way to disk, else the stored one, when its status and retry count are
    /// the entry's (`current`); `stored` is the record read, whether it matched or not.
    private func latestState(of entry: QueueIndex<OperationRecords>.Entry) throws(QueueReadError)
        -> (current: OperationState?, stored: OperationState?) {
        func matches(_ candidate: OperationState) -> Bool {
            // A pending operation's latest record may be the mark of its next attempt, which
            // holds its state with the status of the attempt.
            (candidate.status == entry.status || (candidate.status == .inProgress && entry.status == .pending))
                && candidate.retryCount == entry.retryCount
        }
        if let pending = unwritten.withLock({ $0[entry.id]?.state }), matches(pending) { return (pending, nil) }
        guard let location = entry.locator.state else { return (nil, nil) }
        let stored = try read(entry.id) { () throws(StorageError) in try log.readState(at: location) }.get()
        return (matches(stored) ? stored : nil, stored)
    }

    /// Runs a read of `id`'s records; a failure is logged as an error with the operation id and
    /// becomes the queue's own error (the storage error type stays below the queue).
    private func read<Value>(_ id: UUID, _ body: () throws(StorageError) -> Value) -> Result<Value, QueueReadError> {
        do {
            return .success(try body())
        } catch {
            logger.error("storage_read_failed", ["id": id.lowercasedText, "error": "\(error)"])
            return .failure(QueueReadError(id: id, reason: "\(error)"))
        }
    }

    /// Gives the index the state of `id` (and where its record now is). Every caller found `id`
    /// in the index under the same lock, and an unknown id is the only change the index refuses,
    /// so a refusal means index and log disagree: it is logged as an error with the operation id,
    /// never dropped in silence.
    private static func apply(_ state: OperationState, locator: OperationRecords? = nil, of id: UUID,
                              to index: inout QueueIndex<OperationRecords>, logger: Logger) {
        do {
            try index.update(id, state: state, locator: locator)
        } catch {
            logger.error("index_update_failed", ["id": id.lowercasedText, "error": "\(error)"])
        }
    }

    // MARK: Events

    /// An operation's lane, as its events name it.
    private typealias Lane = (origin: Origin, orderingKey: String?)

    /// `event: operation` for a new state of `id`; the caller read `lane` under the lock it
    /// already held for the change, so an event costs no second lookup.
    private func announce(_ id: UUID, _ state: OperationState, lane: Lane) {
        events?.publish(.operation(OperationEvent(id: id, status: state.status.rawValue, retryCount: state.retryCount,
                                                  lastError: state.lastError, origin: lane.origin,
                                                  orderingKey: lane.orderingKey)))
    }

    private func announce(_ entry: QueueIndex<OperationRecords>.Entry, status: String) {
        events?.publish(.operation(OperationEvent(id: entry.id, status: status, retryCount: entry.retryCount,
                                                  lastError: entry.lastError, origin: entry.origin,
                                                  orderingKey: entry.orderingKey)))
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
        let was = offline.exchange(value, ordering: .relaxed)
        if was != value { events?.publish("connectivity", .object([("mode", .string(value ? "offline" : "auto"))])) }
        if !value, let replayer = replayer.withLock({ $0 }) { Task { await replayer.kickAll() } }
    }

    package func hasQueued(_ origin: Origin, orderingKey: String?) -> Bool {
        index.withLock { $0.hasQueued(origin: origin, orderingKey: orderingKey) }
    }

    package func operation(withKey idempotencyKey: String, origin: Origin) throws(QueueReadError) -> OperationSnapshot? {
        guard let entry = index.withLock({ $0.entry(forKey: idempotencyKey, origin: origin) }) else { return nil }
        return try keyHolder(entry)
    }

    package func resolveDependency(_ reference: String, origin: Origin) -> UUID? {
        index.withLock { index in
            if let id = UUID(uuidString: reference), index.entry(id) != nil { return id }
            return index.entry(forKey: reference, origin: origin)?.id
        }
    }

    package func enqueue(_ request: OperationRequest, freshKey: UUID? = nil,
                         completion: @escaping @Sendable (Result<OperationSnapshot, EnqueueError>) -> Void) {
        if let refusal = QueueRules.refusal(count: index.count, maxOperations: maxOperations) {
            completion(.failure(refusal))
            return
        }
        assert(freshKey.map { $0.lowercasedText == request.idempotencyKey } ?? true, "a fresh key is the key's UUID")
        let keyIsFresh = freshKey != nil
        guard keyIsFresh || reserveKey(of: request, completion) else { return }
        let operation = OperationSnapshot(request, state: OperationState())
        // Made here, on the caller's thread: the key's parse and both table hashes would
        // otherwise run on the log's writer thread, whose completions hold back the next sync.
        let insertion = QueueIndex<OperationRecords>.Insertion(operation, state: operation.state, freshKey: freshKey)
        let finish: @Sendable (Result<RecordLocation, StorageError>) -> Void = { [self] result in
            let outcome = indexStored(operation, insertion, result)
            if keyIsFresh {
                completion(outcome)
            } else {
                settle(key: ScopedKey(origin: operation.origin, key: operation.idempotencyKey), fingerprint: operation.fingerprint,
                       outcome, completion)
            }
        }
        // The completion keeps the snapshot only: the request (headers, body) is in the frame.
        let bodyBytes = request.bodyCount
        guard bodyBytes >= LargeAppendGate.threshold else {
            log.append(.created(request, operation.state), completion: finish)
            return
        }
        largeAppends.admit(bodyBytes) { [self] in
            log.append(.created(request, operation.state)) { [self] result in
                largeAppends.release(bodyBytes)
                finish(result)
            }
        }
    }

    /// Indexes `operation` once its `created` record is durable (on the log's writer thread),
    /// announces it and wakes its lanes; or turns the append's failure into the client's answer.
    private func indexStored(_ operation: OperationSnapshot, _ insertion: QueueIndex<OperationRecords>.Insertion,
                             _ result: Result<RecordLocation, StorageError>) -> Result<OperationSnapshot, EnqueueError> {
        let location: RecordLocation
        switch result {
        case .success(let written):
            location = written
        case .failure(.full):
            return .failure(.full("the disk is full"))
        case .failure(let error):
            logger.error("storage_failed", ["operation": "enqueue", "id": operation.id.lowercasedText, "error": "\(error)"])
            return .failure(.storage("\(error)"))
        }
        let inserted = index.withLock { index -> Result<[Origin], QueueIndexError> in
            do throws(QueueIndexError) {
                try index.insert(insertion, locator: OperationRecords(created: location, state: nil))
                return .success(index.takeLanesToWake())
            } catch {
                return .failure(error)
            }
        }
        switch inserted {
        case .success(let woken):
            metrics.enqueued()
            announce(operation.id, operation.state, lane: (operation.origin, operation.orderingKey))
            // Stored while its origin is offline: probed from now on, and not woken below.
            reachability.workStored(for: operation.origin)
            wake(woken.filter(isKickable))
            return .success(operation)
        case .failure(let error):
            // The key was checked under its reservation (or made up just now), so only an id
            // already indexed gets here. The record is durable, but recovery refuses it the same
            // way (the first record holding an id wins) and compaction drops it: the operation
            // will never be replayed, so its client must hear an error, not 202.
            let id = operation.id.lowercasedText
            logger.error("enqueue_not_indexed", ["id": id, "error": "\(error)"])
            log.discard(location)
            return .failure(.storage("operation \(id) was written but not indexed: \(error)"))
        }
    }

    /// Makes `request` the one writer of its key and returns true; or returns false when its
    /// answer is settled otherwise: it waits for the key's first writer, or the key is stored.
    private func reserveKey(of request: OperationRequest,
                            _ completion: @escaping @Sendable (Result<OperationSnapshot, EnqueueError>) -> Void) -> Bool {
        // One writer per key: later requests with the key wait for the first one's outcome.
        let key = ScopedKey(origin: request.origin, key: request.idempotencyKey)
        let first = reserving.withLock { map -> Bool in
            if map[key] != nil {
                map[key]?.append((request.fingerprint, completion))
                return false
            }
            map[key] = []
            return true
        }
        guard first else { return false }
        // The proxy looked the key up before it chose to store, but a request with the same key
        // may have been stored since (forwarded first, then queued; or on another loop). A second
        // `created` record for the key would be refused by the index while its client heard
        // 202: answer it as a request that waited for the key's first writer is answered.
        guard let holder = index.withLock({ $0.entry(forKey: request.idempotencyKey, origin: request.origin) }) else { return true }
        let outcome: Result<OperationSnapshot, EnqueueError>
        do {
            outcome = .success(try keyHolder(holder))
        } catch {
            outcome = .failure(.storage("\(error)"))
        }
        settle(key: key, fingerprint: request.fingerprint, outcome, completion)
        return false
    }

    /// Whether a new operation should wake `origin`'s lanes: not while it is offline or forced
    /// offline. Its lanes are parked then, and what ends that kicks them (the origin answering a
    /// probe, the switch going back to auto); a kick now would only wake them to park again, one
    /// task and one replayer hop per group commit. The check follows the index insert, so an
    /// origin coming back meanwhile is either seen online here or kicks lanes that find the new
    /// operation.
    private func isKickable(_ origin: Origin) -> Bool {
        !forcedOffline && reachability.isOnline(origin)
    }

    /// Answers the first writer of a key and every request that waited for it: each gets the
    /// operation holding the key when its fingerprint matches, else `keyConflict`; a failure
    /// goes to all of them. The reservation ends before anyone is answered: a repeat sent once
    /// the first writer heard its answer finds the key in the index and reads the stored
    /// record, never this outcome kept in memory.
    private func settle(key: ScopedKey, fingerprint: [UInt8], _ outcome: Result<OperationSnapshot, EnqueueError>,
                        _ completion: @Sendable (Result<OperationSnapshot, EnqueueError>) -> Void) {
        func answer(_ fingerprint: [UInt8]) -> Result<OperationSnapshot, EnqueueError> {
            guard case .success(let holder) = outcome, holder.fingerprint != fingerprint else { return outcome }
            return .failure(.keyConflict)
        }
        let waiting = reserving.withLock { $0.removeValue(forKey: key) ?? [] }
        completion(answer(fingerprint))
        for waiter in waiting { waiter.completion(answer(waiter.fingerprint)) }
    }
}

// MARK: - The replayer's view

extension OutboxQueue: ReplaySource {
    package func takeWork(for origin: Origin, now: Int64) -> ReplayWork {
        enum Step {
            case take(QueueIndex<OperationRecords>.Take, CallCancellation, AttemptMark?)
            case failDependent(QueueIndex<OperationRecords>.Entry)
            case wait(Int64)
            case idle
        }
        let (step, woken) = index.withLock { index -> (Step, [Origin]) in
            let lane = index.nextReady(origin: origin, now: now)
            for id in lane.dependencyFailed {
                if let dependent = index.entry(id) { return (.failDependent(dependent), []) }
            }
            switch lane.next {
            case .deliver(let id):
                // `record` is writing a state of it: its lane waits for that write, which wakes it.
                guard !isRecording(id) else { return (.idle, []) }
                let cancellation = CallCancellation()
                guard let taken = index.take(id, now: now, cancellation: cancellation) else { return (.idle, []) }
                let mark: AttemptMark? = taken.mark == .written ? nil : AttemptMark()
                if let mark { book.withLock { $0.marks[id] = mark } }
                if taken.mark == .missing {
                    // The attempt waits for this record: it starts a sync of its own.
                    appendMark(id, markState(of: taken.entry, number: taken.inProgress.attempts, now: now), deferred: false)
                }
                // The lane's next operations, marked behind its outcomes: by the time it reaches
                // them their marks are on disk.
                let ahead = index.reserveAhead(after: id, skip: isRecording)
                for marked in ahead {
                    var state = marked.state
                    if marked.errorCut, let entry = index.entry(marked.id) { state.lastError = fullState(of: entry).lastError }
                    appendMark(marked.id, markState(state, now: now), deferred: true)
                }
                return (.take(taken, cancellation, mark), index.takeLanesToWake())
            case .wait(let until):
                return (.wait(until), [])
            case .busy, .idle:
                return (.idle, [])
            }
        }
        switch step {
        case .idle: return .idle
        case .wait(let until): return .wait(until: until)
        case .failDependent(let dependent): return .failDependent(dependent.id, dependent.state)
        case .take(let taken, let cancellation, let mark):
            let entry = taken.entry
            announce(entry.id, taken.inProgress, lane: (entry.origin, entry.orderingKey))
            wake(woken.filter { $0 != origin })
            let request: OperationRequest
            if let readAhead = readAhead.withLock({ $0.removeValue(forKey: entry.id) }) {
                request = readAhead
            } else {
                do {
                    request = try log.readRequest(at: entry.locator.created)
                } catch {
                    // Not sent: the operation goes back as it was, and the lane looks again.
                    giveBack(entry.id, taken: entry.state, number: taken.inProgress.attempts)
                    if case .stale = error {
                        // A compaction moved it a moment ago: the index is about to point at the copy.
                        return .wait(until: now + 50)
                    }
                    // Skipping it would let later operations overtake it, and failing it would give
                    // up on a request that may read fine once the disk recovers: the lane retries,
                    // loudly, until then or until an operator deletes it.
                    logger.error("storage_read_failed", ["id": entry.id.lowercasedText, "error": "\(error)"])
                    return .wait(until: now + 1000)
                }
            }
            return .attempt(ReplayAttempt(id: entry.id, request: request, taken: entry.state, inProgress: taken.inProgress,
                                          cancellation: cancellation, mark: mark))
        }
    }

    /// The record saying `entry`'s attempt `number` may start (its mark): its latest state as an
    /// attempt in flight since `now`. Recovery reads it as an attempt made: pending again,
    /// attempted, its next attempt numbered `number + 1`.
    private func markState(of entry: QueueIndex<OperationRecords>.Entry, number: Int, now: Int64) -> OperationState {
        var state = fullState(of: entry)
        state.attempts = number
        return markState(state, now: now)
    }

    /// `state` (the operation's, its attempt count the marked one) as its mark.
    private func markState(_ state: OperationState, now: Int64) -> OperationState {
        var state = state
        state.status = .inProgress
        state.lastAttemptAt = now
        state.nextAttemptAt = nil
        state.response = nil
        state.conflict = nil
        return state
    }

    /// Appends the mark of `id`'s attempt (under the index's lock, so that it lands in the log
    /// in the order the index saw it), and settles whatever waits on it once it is on disk.
    private func appendMark(_ id: UUID, _ state: OperationState, deferred: Bool) {
        let number = state.attempts
        log.append(.updated(id, state), deferred: deferred) { [self] result in
            switch result {
            case .success(let location):
                let mark = index.withLock { index -> AttemptMark? in
                    relocate(id, to: location, in: &index)
                    index.markWritten(id, number: number, written: true)
                    return book.withLock { $0.marks.removeValue(forKey: id) }
                }
                mark?.settle(written: true)
            case .failure(let error):
                logger.error("storage_failed", ["operation": "mark", "id": id.lowercasedText, "error": "\(error)"])
                // A refused append completes at once, inside the index's lock: settle later.
                Task {
                    let mark = index.withLock { index -> AttemptMark? in
                        index.markWritten(id, number: number, written: false)
                        return book.withLock { $0.marks.removeValue(forKey: id) }
                    }
                    mark?.settle(written: false)
                }
            }
        }
    }

    package func release(_ attempt: ReplayAttempt) {
        giveBack(attempt.id, taken: attempt.taken, number: attempt.number)
    }

    /// Puts a taken attempt that was never sent back: pending as it was, its attempt count
    /// without it, written so that a restart numbers it the same.
    private func giveBack(_ id: UUID, taken: OperationState, number: Int) {
        let woken = index.withLock { index -> [Origin] in
            endAttempt(id)
            guard index.release(id, taken: taken, number: number), let entry = index.entry(id) else { return [] }
            var state = fullState(of: entry)
            state.attempts = number - 1
            let serial = holdUnwritten(id, state)
            append(id, state, serial: serial, deferred: true, written: {})
            return index.takeLanesToWake()
        }
        wake(woken)
    }

    package func record(_ id: UUID, _ state: OperationState) async {
        // Marked as being written, under the lock: no mark for it is appended until this state
        // is in the index, or it would land after this one on disk with the older state. And
        // the attempt count as the index has it, which the caller's look may not have seen.
        var state = state
        let known = index.withLock { index -> Bool in
            guard let entry = index.entry(id) else { return false }
            state.attempts = max(state.attempts, entry.attempts)
            book.withLock { $0.recording[id, default: 0] += 1 }
            return true
        }
        guard known else { return }
        let location: RecordLocation?
        do {
            location = try await log.append(.updated(id, state))
        } catch {
            logger.error("storage_failed", ["operation": "update", "id": id.lowercasedText, "error": "\(error)"])
            location = nil
        }
        let (woken, lane) = index.withLock { index -> ([Origin], Lane?) in
            book.withLock { book in
                book.recording[id, default: 1] -= 1
                if book.recording[id] == 0 { book.recording[id] = nil }
            }
            guard let location else { return (index.takeLanesToWake(), nil) }
            // Gone meanwhile: an admin delete, whose record is appended after this one's or wins
            // at recovery anyway.
            guard let entry = index.entry(id) else {
                log.discard(location)
                return ([], nil)
            }
            Self.apply(state, locator: OperationRecords(created: entry.locator.created, state: location), of: id,
                       to: &index, logger: logger)
            if state.status != .inProgress { endAttempt(id) }
            if let superseded = entry.locator.state { log.discard(superseded) }
            return (index.takeLanesToWake(), (entry.origin, entry.orderingKey))
        }
        if let lane { announce(id, state, lane: lane) }
        wake(woken)
        if state.status.isFinished { notifyDrainWaiters() }
    }

    package func recordSoon(_ id: UUID, _ state: OperationState, written: @escaping @Sendable () -> Void) {
        applyAndWrite(id, state, stepOf: nil, written: written)
    }

    package func recordSoon(_ id: UUID, _ state: OperationState, replaying origin: Origin,
                            written: @escaping @Sendable () -> Void) {
        applyAndWrite(id, state, stepOf: origin, written: written)
    }

    package func hurryWrites() {
        log.hurry()
    }

    package func hasWork(for origin: Origin, now: Int64) -> Bool {
        index.withLock { $0.hasWork(origin: origin, now: now) }
    }

    /// Reads the request `id`'s lane delivers next while `id` is in flight, so that `takeWork`
    /// finds it in memory: the read leaves the time between one response and the next
    /// request. A failed read is left to `takeWork`, which reads again and reports it.
    package func readAhead(after id: UUID) {
        guard let (next, locator) = index.withLock({ $0.upNext(after: id) }), locator.created.length <= Self.readAheadMaxBytes,
              readAhead.withLock({ $0[next] == nil }) else { return }
        let request: OperationRequest
        do {
            request = try log.readRequest(at: locator.created)
        } catch {
            return
        }
        readAhead.withLock { map in
            if map.count >= Self.readAheadLimit { map.removeAll() }
            map[next] = request
        }
    }

    /// Applies and writes `state`. For the replayer's own step on a lane of `replayed`, the
    /// lanes of that origin are not woken (its replayer looks for its next work itself) and
    /// the write is deferred: nobody waits for it, so it starts no sync by itself.
    private func applyAndWrite(_ id: UUID, _ state: OperationState, stepOf replayed: Origin?,
                               written: @escaping @Sendable () -> Void) {
        let serial = holdUnwritten(id, state)
        let write = { [self] in append(id, state, serial: serial, deferred: replayed != nil, written: written) }
        // A pending state with a schedule is what a flush clears: appended under the index's
        // lock, as the flush's own writes are, so that a flush landing between this apply and
        // this append cannot have its cleared state overtaken on disk by the schedule it
        // cleared (a restart would bring the backoff back). Other states (a response body can
        // be megabytes to encode) are appended after the lock.
        if state.status == .pending, state.nextAttemptAt != nil {
            applyNow(id, state, sparing: replayed, whileLocked: write)
        } else {
            applyNow(id, state, sparing: replayed)
            write()
        }
        if state.status.isFinished { notifyDrainWaiters() }
    }

    /// Puts `state` in `unwritten` before the index gets it, so a reader who finds the new
    /// state in the index finds its bodies too; returns the serial its `append` passes on.
    private func holdUnwritten(_ id: UUID, _ state: OperationState) -> UInt64 {
        let serial = serials.wrappingAdd(1, ordering: .relaxed).newValue
        unwritten.withLock { $0[id] = (serial, state) }
        return serial
    }

    /// Appends `state` of `id`, held since ``holdUnwritten(_:_:)``: it leaves `unwritten` once
    /// its record is on disk and the locator points there.
    private func append(_ id: UUID, _ state: OperationState, serial: UInt64, deferred: Bool,
                        written: @escaping @Sendable () -> Void) {
        log.append(.updated(id, state), deferred: deferred) { [self] result in
            switch result {
            case .success(let location):
                index.withLock { relocate(id, to: location, in: &$0) }
                unwritten.withLock { map in
                    if map[id]?.serial == serial { map.removeValue(forKey: id) }
                }
            case .failure(let error):
                logger.error("storage_failed", ["operation": "update", "id": id.lowercasedText, "error": "\(error)"])
            }
            written()
        }
    }

    /// Points `id`'s state at its record just written. Later states of the same operation are
    /// appended (and complete) after this one, so the last completion to run carries the newest
    /// location. The state itself is in the index already: only the locator moves.
    private func relocate(_ id: UUID, to location: RecordLocation, in index: inout QueueIndex<OperationRecords>) {
        var superseded: RecordLocation?
        // Deleted meanwhile: the record it supersedes went with the operation.
        if index.relocate(id, { superseded = $0.state; $0.state = location }) {
            if let superseded { log.discard(superseded) }
        } else {
            log.discard(location)
        }
    }

    /// Tells the log an operation's records are no longer needed (it was removed).
    private func discard(_ records: OperationRecords) {
        log.discard(records.created)
        if let state = records.state { log.discard(state) }
    }

    /// Forgets what waits on the attempt of `id` (its outcome is in): called inside the index's
    /// lock. Its lane drops its cancellation as the operation leaves `inProgress`.
    private func endAttempt(_ id: UUID) {
        book.withLock { book in
            // Nearly always empty: no hashing on the path of every delivery.
            if !book.marks.isEmpty { book.marks[id] = nil }
        }
    }

    /// Whether `record` is writing a state of `id`: called inside the index's lock.
    private func isRecording(_ id: UUID) -> Bool {
        book.withLock { $0.recording.isEmpty ? false : $0.recording[id] != nil }
    }

    /// Gives the index `state` and announces it; wakes the lanes it changed except those of
    /// `spared`. `whileLocked` runs under the index's lock, after the change.
    private func applyNow(_ id: UUID, _ state: OperationState, sparing spared: Origin?,
                          whileLocked: () -> Void = {}) {
        let (woken, lane) = index.withLock { index -> ([Origin], Lane?) in
            defer { whileLocked() }
            // Gone meanwhile (an admin delete): a record written for it is then ignored at recovery too.
            guard let lane = index.lane(of: id) else { return ([], nil) }
            Self.apply(state, of: id, to: &index, logger: logger)
            if state.status != .inProgress { endAttempt(id) }
            return (index.takeLanesToWake(), lane)
        }
        if let lane { announce(id, state, lane: lane) }
        wake(spared.map { spared in woken.filter { $0 != spared } } ?? woken)
    }

    package var originsWithWork: [Origin] {
        index.withLock { index in index.knownOrigins.filter { index.hasQueued(origin: $0) } }
    }
}

/// What waits on the attempts the queue has handed out, kept beside the index and under its
/// lock (the cancellation of each attempt in flight is its lane's, in the index).
private struct AttemptBook {
    /// Attempts waiting for their mark to reach the disk.
    var marks: [UUID: AttemptMark] = [:]
    /// Operations whose state `record` is writing (how many writes): no mark is made for them
    /// and they are not taken until it is in.
    var recording: [UUID: Int] = [:]
}

// MARK: - The admin API's view

extension OutboxQueue: QueueStore {}

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

    package var storageDamagedRecords: Int { log.damagedRecords }

    package var store: StoreStatus { StoreStatus(kind: "local", reachable: true, lastError: nil, instance: instance) }

    package func activeLanes(origin: Origin) -> Int {
        index.withLock { $0.activeLanes(origin: origin) }
    }

    package func unfinishedCount(origin: Origin) -> Int {
        index.withLock { $0.count(of: .pending, origin: origin) + $0.count(of: .inProgress, origin: origin) }
    }

    package func list(status: OperationStatus?, tag: String?, origin: String?, orderingKey: String?, after: UUID?,
                      limit: Int) -> (items: [OperationSnapshot], next: UUID?) {
        let originValue = origin.flatMap { Origin.parseAbsolute($0 + "/")?.0 }
        if origin != nil && originValue == nil { return ([], nil) }
        let filter = QueueIndex<OperationRecords>.Filter(status: status, tag: tag, origin: originValue, orderingKey: orderingKey)
        let page: QueueIndex<OperationRecords>.Page? = index.withLock { index in
            if let after { return index.list(filter, after: after, limit: limit) }
            return index.list(filter, limit: limit)
        }
        guard let page else { return ([], nil) }
        // Method and target live in the created record: one read per listed operation.
        // An unreadable one is still listed (one bad record must not hide the page), without
        // method and target, and logged as an error with its id by `read`.
        let items = page.entries.map { entry in
            switch read(entry.id, { () throws(StorageError) in try log.readRequest(at: entry.locator.created) }) {
            case .success(let request): snapshot(entry, request: request)
            case .failure: snapshot(entry, request: nil)
            }
        }
        return (items, page.next == nil ? nil : items.last?.id)
    }

    package func view(_ id: UUID, visitingBody visitBody: (UnsafeRawBufferPointer) -> Void) -> OperationView? {
        var entry = index.withLock { $0.entry(id) }
        // A compaction that moved the record a moment ago is about to point the index at the
        // copy: look again (nothing of the body was visited, a stale location is refused first).
        for _ in 0..<4 {
            guard let current = entry else { return nil }
            let head: (request: OperationRequest, body: LogBytes)
            do throws(StorageError) {
                head = try log.readRequestHead(at: current.locator.created, visitingBody: visitBody)
            } catch .stale {
                entry = index.withLock { $0.entry(id) }
                continue
            } catch {
                logger.error("storage_read_failed", ["id": id.lowercasedText, "error": "\(error)"])
                return nil
            }
            var state = current.state
            do {
                (state.response, state.conflict) = try latestBodies(of: current)
            } catch {
                // Logged by `read`; the view shows the rest.
            }
            return OperationView(snapshot: snapshot(current, request: head.request, state: state), headers: head.request.headers,
                                 body: head.body)
        }
        logger.error("storage_read_failed", ["id": id.lowercasedText, "error": "its record kept moving"])
        return nil
    }

    package func detail(_ id: UUID) -> (OperationSnapshot, OperationRequest)? {
        guard let entry = index.withLock({ $0.entry(id) }) else { return nil }
        // `read` logs an unreadable record as an error with the operation id. Without its
        // request there is nothing to show; without its latest state, the detail lacks only the
        // response and conflict bodies.
        guard case .success(let request) = read(id, { () throws(StorageError) in try log.readRequest(at: entry.locator.created) })
        else { return nil }
        var state = entry.state
        do {
            (state.response, state.conflict) = try latestBodies(of: entry)
        } catch {
            // Logged by `read`; the detail shows the rest.
        }
        return (snapshot(entry, request: request, state: state), request)
    }

    package func retry(_ id: UUID) async -> Result<OperationSnapshot, AdminRefusal> {
        guard let entry = index.withLock({ $0.entry(id) }) else { return .failure(.notFound) }
        guard QueueRules.isRetryable(entry.status) else { return .failure(.notRetryable(entry.status)) }
        // `record` keeps the attempt count as the index has it, whatever this look saw.
        await record(id, QueueRules.retried(attempts: entry.attempts))
        wake([entry.origin])
        // The body is not needed for the answer: checked in pieces, never held.
        guard let view = view(id, visitingBody: { _ in }) else { return .failure(.notFound) }
        return .success(view.snapshot)
    }

    package func deleteAll(status: OperationStatus?) async -> Int {
        await removeAll(QueueIndex<OperationRecords>.Filter(status: status), where: { _ in true })
    }

    package func prune(createdBefore cutoff: Int64) async -> Int {
        await removeAll(QueueIndex<OperationRecords>.Filter(), where: { $0.createdAt < cutoff })
    }

    package func flush() async {
        await clearSchedules(QueueIndex<OperationRecords>.Filter(status: .pending), where: { _ in true })
    }

    package func wakeHeld(origin: Origin) async {
        await clearSchedules(QueueIndex<OperationRecords>.Filter(status: .pending, origin: origin),
                             where: { QueueRules.isHeldForCredentials($0) })
    }

    /// Makes the pending operations `filter` and `include` choose due now (their lanes too).
    private func clearSchedules(_ filter: QueueIndex<OperationRecords>.Filter,
                                where include: @escaping (OperationState) -> Bool) async {
        // Clearing nextAttemptAt makes every lane due. The cleared states are written too, or a
        // restart would bring the old schedule back (an hour's backoff after a flush during an
        // outage). Applied and appended under one lock, before any lane is woken: a state the
        // replayer writes next for the same operation is appended after this one.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let writes = Countdown { continuation.resume() }
            let woken = index.withLock { index -> [Origin] in
                let waiting = index.list(filter, limit: Int.max).entries
                for entry in waiting where entry.nextAttemptAt != nil && include(entry.state) {
                    guard let state = QueueRules.flushed(fullState(of: entry)) else { continue }
                    let serial = holdUnwritten(entry.id, state)
                    Self.apply(state, of: entry.id, to: &index, logger: logger)
                    writes.add()
                    append(entry.id, state, serial: serial, deferred: false, written: writes.done)
                }
                return index.knownOrigins
            }
            wake(woken)
            if let replayer = replayer.withLock({ $0 }) { Task { await replayer.kickAll() } }
            writes.done()
        }
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
                // Cancelled, the sleep only ends early: the waiter then hears "not drained".
                try? await Task.sleep(nanoseconds: UInt64(timeoutSeconds * 1e9))
                drainWaiters.withLock { $0.removeValue(forKey: token) }?.resume(returning: false)
            }
        }
    }
}

/// The `deleted` records of one removal step on their way to disk: which of them were written,
/// in append order (the log completes a caller's appends in the order it made them), and the
/// first failure; `then` runs once every one has completed.
private final class RemovalWrites: Sendable {
    struct Outcome: Sendable {
        var written: [Bool]
        var failure: StorageError?
    }

    private let state: Mutex<(next: Int, outcome: Outcome)>
    private let then: @Sendable (Outcome) -> Void

    init(count: Int, then: @escaping @Sendable (Outcome) -> Void) {
        state = Mutex((0, Outcome(written: [Bool](repeating: false, count: count))))
        self.then = then
    }

    func done(_ result: Result<RecordLocation, StorageError>) {
        let finished = state.withLock { state -> Outcome? in
            switch result {
            case .success: state.outcome.written[state.next] = true
            case .failure(let error): state.outcome.failure = state.outcome.failure ?? error
            }
            state.next += 1
            return state.next == state.outcome.written.count ? state.outcome : nil
        }
        if let finished { then(finished) }
    }
}

/// Runs `then` once `done` has been called once more than `add`: the caller's own `done` comes
/// last, after it has added everything it waits for.
private final class Countdown: Sendable {
    private let left = Atomic<Int>(1)
    private let then: @Sendable () -> Void

    init(then: @escaping @Sendable () -> Void) {
        self.then = then
    }

    func add() {
        left.wrappingAdd(1, ordering: .relaxed)
    }

    @Sendable func done() {
        if left.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue == 0 { then() }
    }
}

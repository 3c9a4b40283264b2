import Foundation
import OutboxModel
import OutboxQueue
import Synchronization

/// The lanes this instance holds claims on, each with the operations it took ahead: all of the
/// shared queue that lives in this instance's memory.
struct LaneBook: Sendable {
    var lanes: [LaneID: HeldLane] = [:]
    /// The held lanes of each origin (by its text) in turn order, for `takeWork`: a lane that
    /// delivered goes behind the others of its origin.
    var byOrigin: [String: [LaneID]] = [:]
    /// The lane of each operation in flight, or whose state `record` is writing.
    var inFlight: [UUID: LaneID] = [:]

    mutating func add(_ lane: HeldLane, as id: LaneID) {
        if lanes.updateValue(lane, forKey: id) == nil { byOrigin[id.origin, default: []].append(id) }
    }

    mutating func remove(_ id: LaneID) -> HeldLane? {
        guard let lane = lanes.removeValue(forKey: id) else { return nil }
        byOrigin[id.origin]?.removeAll { $0 == id }
        if byOrigin[id.origin]?.isEmpty == true { byOrigin[id.origin] = nil }
        if let flying = lane.inFlight { inFlight[flying.id] = nil }
        return lane
    }

    /// `id`, which just delivered, takes its turn after the other lanes of its origin.
    mutating func tookTurn(_ id: LaneID) {
        guard var order = byOrigin.removeValue(forKey: id.origin), let index = order.firstIndex(of: id) else { return }
        order.remove(at: index)
        order.append(id)
        byOrigin[id.origin] = order
    }

    func held(origin: String) -> Int { byOrigin[origin]?.count ?? 0 }

    /// Runs `body` on the lane `id` in place (a lane copied out of the table and back would copy
    /// its operations ahead each time); nil when the lane is not held.
    mutating func update<T>(_ id: LaneID, _ body: (inout HeldLane) -> T) -> T? {
        guard lanes[id] != nil else { return nil }
        return body(&lanes[id]!)
    }
}

/// One lane this instance delivers: its claim, what it took ahead in the lane's order, the
/// attempt in flight, and the writes of its outcomes not yet committed (the claim is let go
/// only after them: a write made under a claim that is gone matches nothing).
struct HeldLane: Sendable {
    var claim: LaneClaim
    var origin: Origin
    /// Taken ahead, in the lane's order (rank, then arrival), each with its attempt counted.
    var ahead: [Ahead] = []
    var inFlight: InFlight?
    /// Writes of its operations' states handed to the group commit and not committed, by
    /// operation: until they are, the database still has those operations as they were, so a
    /// look ahead leaves them out, and the claim is not let go (a write under a claim that is
    /// gone matches nothing).
    var unwritten: [UUID: Unwritten] = [:]
    var refilling = false
    /// The last look ahead found fewer operations than it asked for: the lane holds no more
    /// than what is here (until something is added to it).
    var exhausted = false
    var releasing = false

    struct InFlight: Sendable {
        var id: UUID
        /// Its arrival number (`seq`): a look ahead leaves it out by it.
        var seq: Int64
        var request: OperationRequest
        var cancellation: CallCancellation
        /// The attempt count committed for it.
        var marked: Int
        /// Its state in flight (`inProgress`), which this instance's views show before the
        /// write saying so has committed.
        var state: OperationState?
        /// Its state in flight as it is written, once the attempt has lasted `inFlightWriteDelay`
        /// (the keeper's tick writes it then); nil once handed to the writer, or when its mark
        /// wrote it already.
        var unwrittenState: PostgresQueue.PendingState?
        /// When it was taken (monotonic ns).
        var takenAt: UInt64 = 0
    }

    var isIdle: Bool { ahead.isEmpty && inFlight == nil && unwritten.isEmpty && !refilling && exhausted && !releasing }

    /// Writes of one operation's state not committed yet, and its `seq`.
    struct Unwritten: Sendable {
        var count: Int
        let seq: Int64
    }

    mutating func writing(_ id: UUID, seq: Int64) { unwritten[id, default: Unwritten(count: 0, seq: seq)].count += 1 }

    mutating func written(_ id: UUID) {
        guard var entry = unwritten[id] else { return }
        entry.count -= 1
        unwritten[id] = entry.count > 0 ? entry : nil
    }

    /// The arrival numbers of the lane's operations this instance has already (ahead, in flight,
    /// or their states not committed): a look ahead leaves them out.
    var held: [Int64] { ahead.map(\.seq) + (inFlight.map { [$0.seq] } ?? []) + unwritten.values.map(\.seq) }

    /// Adds what a look ahead found, keeping the lane's order; one already here keeps its place.
    mutating func merge(_ found: [Ahead]) {
        let known = Set(ahead.map(\.id))
        ahead += found.filter { !known.contains($0.id) }
        // Stable: an operation put back for its retry stays first among equals.
        ahead.sort { ($0.rank, -$0.seq) > ($1.rank, -$1.seq) }
    }
}

/// An operation a held lane took ahead.
struct Ahead: Sendable {
    var snapshot: OperationSnapshot
    var seq: Int64
    var rank: Int
    /// Nil while its body, too large to come ahead, is not read yet.
    var request: OperationRequest?
    /// The attempt count committed for it: an attempt numbered above needs a mark first.
    var marked: Int
    /// Its dependency ended failed or conflict (`QueueRules.dependency`).
    var doomed: Bool
    var loading = false

    var id: UUID { snapshot.id }
}

extension PostgresQueue {
    /// A lane asks for more once fewer than this many are left ahead; it asks for twice as many.
    static let refillBelow = 32

    package var forcedOffline: Bool { offline.load(ordering: .relaxed) }

    package var originsWithWork: [Origin] { Array(originsWithWorkCache.withLock { $0 }) }

    package func takeWork(for origin: Origin, now: Int64) -> ReplayWork {
        enum Step {
            case attempt(ReplayAttempt, LaneID, PendingState, AttemptMark?, refill: Bool)
            case failDependent(UUID, OperationState)
            case wait(Int64)
            case idle
        }
        var loads: [(UUID, LaneID)] = []
        let step = book.withLock { book -> Step in
            guard let held = book.byOrigin[origin.description] else { return .idle }
            var earliest: Int64?
            for laneID in held {
                // In place: a copy of the lane out of the table would copy its operations ahead.
                let step = book.update(laneID) { lane -> Step? in
                    guard lane.inFlight == nil, !lane.releasing, let head = lane.ahead.first else { return nil }
                    if head.doomed {
                        // The lane waits for its write, as for an attempt's outcome.
                        lane.ahead.removeFirst()
                        let request = head.request ?? OperationRequest(head.snapshot, headers: [], body: [])
                        lane.inFlight = HeldLane.InFlight(id: head.id, seq: head.seq, request: request,
                                                          cancellation: CallCancellation(), marked: head.marked)
                        return .failDependent(head.id, head.snapshot.state)
                    }
                    if let due = head.snapshot.state.nextAttemptAt, due > now {
                        earliest = min(earliest ?? due, due)
                        return nil
                    }
                    guard let request = head.request else {
                        if !head.loading {
                            lane.ahead[0].loading = true
                            loads.append((head.id, laneID))
                        }
                        return nil
                    }
                    lane.ahead.removeFirst()
                    var taken = head.snapshot.state
                    taken.status = .pending
                    let number = taken.attempts + 1
                    let inProgress = ReplayTransition.startAttempt(current: taken, now: now, number: number)
                    let cancellation = CallCancellation()
                    // Its attempt is counted already when it was taken ahead; else (a retry) the
                    // write of its state in flight counts it, and the attempt waits for its commit.
                    let mark: AttemptMark? = number > head.marked ? AttemptMark() : nil
                    let write = PendingState(id: head.id, state: inProgress, priority: request.priority, claim: lane.claim)
                    lane.inFlight = HeldLane.InFlight(id: head.id, seq: head.seq, request: request, cancellation: cancellation,
                                                      marked: max(head.marked, number), state: inProgress,
                                                      unwrittenState: mark == nil ? write : nil, takenAt: MonotonicClock.nanos())
                    if mark != nil { lane.writing(head.id, seq: head.seq) }
                    let refill = lane.ahead.count < Self.refillBelow && !lane.exhausted && !lane.refilling
                    let attempt = ReplayAttempt(id: head.id, request: request, taken: taken, inProgress: inProgress,
                                                cancellation: cancellation, mark: mark)
                    return .attempt(attempt, laneID, write, mark, refill: refill)
                }
                guard let step = step ?? nil else { continue }
                switch step {
                case .attempt(let attempt, _, _, _, _):
                    book.tookTurn(laneID)
                    book.inFlight[attempt.id] = laneID
                case .failDependent(let id, _):
                    book.inFlight[id] = laneID
                case .wait, .idle:
                    break
                }
                return step
            }
            return earliest.map { .wait($0) } ?? .idle
        }
        for (id, laneID) in loads { loadBody(of: id, in: laneID, origin: origin) }
        switch step {
        case .idle: return .idle
        case .wait(let until): return .wait(until: until)
        case .failDependent(let id, let state): return .failDependent(id, state)
        case .attempt(let attempt, let laneID, let pending, let mark, let refill):
            announce(attempt.id, attempt.inProgress, origin: origin, orderingKey: laneID.orderingKey)
            if let mark {
                transitions.withLock { _ in
                    record(pending.id, pending.state, priority: pending.priority, claim: pending.claim, lane: laneID) { [self] result in
                        mark.settle(written: (try? result.get()) == true)
                        writeDone(of: attempt.id, in: laneID)
                    }
                }
            }
            // Else most attempts end within milliseconds, and their outcome says all: the state in
            // flight is written (for the other instances' views, and as the lane's head) by the
            // keeper's next tick, only for an attempt still in flight `inFlightWriteDelay` after
            // it was taken (`writeLongAttempts`): no timer per attempt.
            if refill { lookAhead(in: laneID) }
            return .attempt(attempt)
        }
    }

    package func recordSoon(_ id: UUID, _ state: OperationState, written: @escaping @Sendable () -> Void) {
        recordOutcome(id, state, written: written)
    }

    package func recordSoon(_ id: UUID, _ state: OperationState, replaying origin: Origin,
                            written: @escaping @Sendable () -> Void) {
        recordOutcome(id, state, written: written)
    }

    package func record(_ id: UUID, _ state: OperationState) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            recordOutcome(id, state) { continuation.resume() }
        }
    }

    package func release(_ attempt: ReplayAttempt) {
        // Never sent: pending as it was taken, its attempt count without this attempt; the
        // lane takes it again first.
        recordOutcome(attempt.id, attempt.taken, givenBack: true, written: {})
    }

    package func hasWork(for origin: Origin, now: Int64) -> Bool {
        book.withLock { book in
            (book.byOrigin[origin.description] ?? []).contains { laneID in
                guard let lane = book.lanes[laneID], lane.inFlight == nil, let head = lane.ahead.first else { return false }
                return head.doomed || (head.request != nil && (head.snapshot.state.nextAttemptAt ?? now) <= now)
            }
        }
    }

    /// Writes `state` of the operation in flight `id` under its lane's claim. A retry puts it
    /// back at the head of its lane (with its new schedule); a finished one leaves the lane,
    /// which looks for more.
    private func recordOutcome(_ id: UUID, _ state: OperationState, givenBack: Bool = false,
                               written: @escaping @Sendable () -> Void) {
        transitions.withLock { _ in recordOutcomeInOrder(id, state, givenBack: givenBack, written: written) }
    }

    /// `recordOutcome` under `transitions`.
    private func recordOutcomeInOrder(_ id: UUID, _ state: OperationState, givenBack: Bool,
                                      written: @escaping @Sendable () -> Void) {
        let instance = self.instance
        let found = book.withLock { book -> (LaneID, LaneClaim, OperationRequest, Bool)? in
            guard let laneID = book.inFlight[id] else { return nil }
            let found = book.update(laneID) { lane -> (LaneID, LaneClaim, OperationRequest, Bool)? in
                guard let flying = lane.inFlight, flying.id == id else { return nil }
                if state.status != .inProgress { lane.inFlight = nil }
                if state.status == .pending {
                    var snapshot = OperationSnapshot(flying.request, state: state)
                    snapshot.instance = instance
                    lane.ahead.insert(Ahead(snapshot: snapshot, seq: flying.seq, rank: Int.max, request: flying.request,
                                            marked: givenBack ? state.attempts : flying.marked, doomed: false), at: 0)
                }
                lane.writing(id, seq: flying.seq)
                let refill = lane.ahead.count < Self.refillBelow && !lane.exhausted && !lane.refilling
                return (laneID, lane.claim, flying.request, refill)
            }
            if (found ?? nil) != nil, state.status != .inProgress { book.inFlight[id] = nil }
            return found ?? nil
        }
        guard let (laneID, claim, request, refill) = found else {
            // Not this instance's any more (its lane was taken over or let go): the holder now
            // decides, and a write under the old claim would match nothing.
            written()
            return
        }
        if !givenBack { announce(id, state, origin: request.origin, orderingKey: request.orderingKey) }
        record(id, state, priority: request.priority, claim: claim, lane: laneID) { [self] result in
            if case .success(false) = result {
                logger.info("store_write_fenced", ["id": id.lowercasedText, "origin": claim.origin,
                                                   "note": "the lane or the operation changed hands; its state was not written"])
            }
            written()
            writeDone(of: id, in: laneID)
        }
        if refill { lookAhead(in: laneID) }
    }

    /// Fails as `expired` the operations past their TTL that this instance's lanes took ahead.
    /// The sweep of the shared queue leaves held lanes to their holders, and the replayer
    /// expires an operation only as it takes it: a lane whose head waits (held for credentials,
    /// in backoff, its origin offline) would keep its old operations past their TTL. A lane
    /// emptied this way looks ahead for more, which the next maintenance round expires in turn.
    func expireTakenAhead(now: Int64, ttlSeconds: Double) {
        struct Expiry {
            let laneID: LaneID
            let snapshot: OperationSnapshot
            let seq: Int64
            let state: OperationState
            let claim: LaneClaim
        }
        transitions.withLock { _ in
            var refills: [LaneID] = []
            let expiries = book.withLock { book -> [Expiry] in
                var expiries: [Expiry] = []
                for laneID in Array(book.lanes.keys) {
                    book.update(laneID) { lane in
                        guard !lane.releasing else { return }
                        let found = lane.ahead.compactMap { ahead -> Expiry? in
                            ReplayTransition.expire(current: ahead.snapshot.state, createdAt: ahead.snapshot.createdAt, now: now,
                                                    ttlSeconds: ttlSeconds)
                                .map { Expiry(laneID: laneID, snapshot: ahead.snapshot, seq: ahead.seq, state: $0, claim: lane.claim) }
                        }
                        guard !found.isEmpty else { return }
                        let gone = Set(found.map(\.snapshot.id))
                        lane.ahead.removeAll { gone.contains($0.id) }
                        // Written like an outcome: the lane is not let go before the write commits.
                        for expiry in found { lane.writing(expiry.snapshot.id, seq: expiry.seq) }
                        if lane.ahead.count < Self.refillBelow && !lane.exhausted && !lane.refilling { refills.append(laneID) }
                        expiries += found
                    }
                }
                return expiries
            }
            for expiry in expiries {
                let id = expiry.snapshot.id
                announce(id, expiry.state, origin: expiry.snapshot.origin, orderingKey: expiry.snapshot.orderingKey)
                record(id, expiry.state, priority: expiry.snapshot.priority, claim: expiry.claim, lane: expiry.laneID) { [self] _ in
                    writeDone(of: id, in: expiry.laneID)
                }
            }
            for laneID in refills { lookAhead(in: laneID) }
        }
    }

    /// The states of the operations this instance has in flight: its admin views show them
    /// `inProgress` at once, as the local store does, while the write saying so is on its way.
    func inFlightStates() -> [UUID: OperationState] {
        book.withLock { book in
            var states: [UUID: OperationState] = [:]
            for lane in book.lanes.values {
                if let flying = lane.inFlight, let state = flying.state { states[flying.id] = state }
            }
            return states
        }
    }

    /// `snapshot` as this instance sees it: in flight here, it is `inProgress` now.
    func seenHere(_ snapshot: OperationSnapshot, _ flying: [UUID: OperationState]) -> OperationSnapshot {
        guard let state = flying[snapshot.id], !snapshot.state.status.isFinished else { return snapshot }
        var seen = snapshot
        seen.state = state
        seen.instance = instance
        return seen
    }

    /// How long an attempt may be in flight before its state says so in the database (then
    /// within a keeper's tick, 100 ms).
    static let inFlightWriteDelay = 0.05

    /// Writes the states in flight of the attempts taken more than `inFlightWriteDelay` ago
    /// and still in flight (the keeper's tick): under `transitions`, as outcomes are written,
    /// so one attempt's writes reach the writer in the order they happened.
    func writeLongAttempts() {
        let cutoff = MonotonicClock.nanos() &- UInt64(Self.inFlightWriteDelay * 1e9)
        transitions.withLock { _ in
            let due = book.withLock { book -> [(PendingState, LaneID)] in
                var due: [(PendingState, LaneID)] = []
                for (laneID, lane) in book.lanes {
                    guard let flying = lane.inFlight, let pending = flying.unwrittenState, flying.takenAt <= cutoff else { continue }
                    book.update(laneID) { lane in
                        lane.inFlight?.unwrittenState = nil
                        lane.writing(pending.id, seq: flying.seq)
                    }
                    due.append((pending, laneID))
                }
                return due
            }
            for (pending, laneID) in due {
                record(pending.id, pending.state, priority: pending.priority, claim: pending.claim, lane: laneID) { [self] _ in
                    writeDone(of: pending.id, in: laneID)
                }
            }
        }
    }

    /// The state of an attempt taken now, to be written under its lane's claim.
    struct PendingState: Sendable {
        let id: UUID
        let state: OperationState
        let priority: OperationPriority
        let claim: LaneClaim
    }

    /// One write of `laneID`'s committed (or failed): the lane may now be idle, and is let go.
    func writeDone(of id: UUID, in laneID: LaneID) {
        let release = book.withLock { book -> LaneClaim? in
            book.update(laneID) { lane -> LaneClaim? in
                lane.written(id)
                let idle = lane.isIdle
                if idle { lane.releasing = true }
                return idle ? lane.claim : nil
            } ?? nil
        }
        if let release { letGo(laneID, release) }
    }

    /// Takes the lane's next operations ahead (counting their attempts) on a reader's
    /// connection, in a transaction of its own: it waits for no group commit. What the lane has
    /// already (ahead, in flight, or with a state on its way to the database) is left out.
    func lookAhead(in laneID: LaneID) {
        guard let (claim, excluding) = book.withLock({ book -> (LaneClaim, [Int64])? in
            book.update(laneID) { lane -> (LaneClaim, [Int64])? in
                // One look at a time: the next one is asked for when this one is back, if needed.
                guard !lane.refilling, !lane.releasing else { return nil }
                lane.refilling = true
                return (lane.claim, lane.held)
            } ?? nil
        }) else { return }
        let limit = Self.refillBelow * 2
        let statement = PostgresOperations.takeAhead(origin: laneID.origin, lane: laneID.lane, excluding: excluding, limit: limit,
                                                     holder: holder, fence: claim.fence)
        // Planned once per connection: its plan is the same for every lane (the lane's index),
        // and planning it for each look took a fifth of the cluster's time in a keyed drain. In
        // binary: the bodies come as their bytes, not as hex twice their size.
        read({ connection throws(PostgresError) in
            [try connection.executePlannedOnce(statement.sql, statement.parameters, binary: true)]
        }) { [self] result in
            var found: [Ahead] = []
            var failed = false
            switch result {
            case .success(let results):
                let rows = results[0]
                for row in rows.rows.indices {
                    do {
                        let taken = try PostgresOperations.aheadRow(rows, row: row)
                        var snapshot = taken.row.snapshot
                        var state = snapshot.state
                        // Its next attempt is counted by the lane's mark just written: a takeover
                        // would add it.
                        let marked = state.attempts + 1
                        if state.status == .inProgress { state.status = .pending }
                        snapshot.state = state
                        found.append(Ahead(snapshot: snapshot, seq: taken.row.seq, rank: taken.rank, request: taken.request,
                                           marked: marked, doomed: QueueRules.dependency(taken.dependencyStatus) == .doomed))
                    } catch {
                        logger.error("store_read_failed", ["origin": laneID.origin, "error": "\(error)"])
                    }
                }
            case .failure(let error):
                failed = true
                logger.warn("store_lane_read_failed", ["origin": laneID.origin, "error": "\(error)"])
            }
            let (idle, origin) = book.withLock { book -> (LaneClaim?, Origin?) in
                book.update(laneID) { lane -> (LaneClaim?, Origin?) in
                    lane.refilling = false
                    lane.merge(found)
                    // A failed look says nothing: the lane stays unexhausted, and the keeper has it
                    // look again.
                    lane.exhausted = !failed && found.count < limit
                    let idle = lane.isIdle
                    if idle { lane.releasing = true }
                    return (idle ? lane.claim : nil, lane.origin)
                } ?? (nil, nil)
            }
            if let idle { letGo(laneID, idle) }
            if let origin, !found.isEmpty { kick([origin]) }
        }
    }

    /// Reads the body of an operation that is its lane's head but came ahead without it.
    private func loadBody(of id: UUID, in laneID: LaneID, origin: Origin) {
        let statement = PostgresOperations.request(id)
        read({ connection throws(PostgresError) in
            try connection.execute(statement.sql, statement.parameters, binary: true)
        }) { [self] result in
            var request: OperationRequest?
            if case .success(let rows) = result, !rows.rows.isEmpty {
                if let headersText = rows.value(0, "headers"), let headers = PostgresOperations.headers(fromJSON: headersText),
                   let body = rows.bytes(0, "body"), let summary = try? PostgresOperations.summary(rows, row: 0) {
                    request = OperationRequest(summary.snapshot, headers: headers, body: body)
                }
            }
            book.withLock { book in
                guard var lane = book.lanes[laneID], let index = lane.ahead.firstIndex(where: { $0.id == id }) else { return }
                lane.ahead[index].loading = false
                if let request { lane.ahead[index].request = request }
                // Gone (deleted) or unreadable: a poke or the next look ahead sorts it out.
                if case .success(let rows) = result, rows.rows.isEmpty { lane.ahead.remove(at: index) }
                book.lanes[laneID] = lane
            }
            kick([origin])
        }
    }

    /// Lets a lane go that has nothing left: its claim is released on the keeper's connection,
    /// and the lane's row removed when no work is left in it.
    func letGo(_ laneID: LaneID, _ claim: LaneClaim) {
        keeperThread.submit { [self] connection in
            if case .success(let connection) = connection {
                do throws(PostgresError) {
                    try PostgresLanes.release(connection, claim, holder: holder)
                } catch {
                    // The lease lapses by itself; nothing else depends on this release.
                    noteFailure(error)
                }
            }
            book.withLock { book in
                guard book.lanes[laneID]?.claim == claim else { return }
                _ = book.remove(laneID)
            }
        }
    }
}

import Dispatch
import Foundation
import OutboxModel
import OutboxQueue
import Synchronization

/// The keeper's timer. Dispatch sources are thread-safe but not marked `Sendable`; this one is
/// only resumed once and cancelled once, under the store's lock.
final class KeeperTimer: @unchecked Sendable {
    let source: DispatchSourceTimer

    init(source: DispatchSourceTimer) {
        self.source = source
    }
}

/// When the keeper last did each of its jobs, and its backoff while the database is away.
struct KeeperState: Sendable {
    var lastRenewal: UInt64 = 0
    var lastOriginsRefresh: UInt64 = 0
    var lastSizeRefresh: UInt64 = 0
    /// No tick before this (monotonic ns): the database failed the last one.
    var retryAt: UInt64 = 0
    var backoffSeconds = PostgresQueue.firstBackoffSeconds
    /// A tick is queued on the keeper's thread: another is not added.
    var queued = false
}

/// The keeper: on a connection and a thread of its own, every tenth of a second, it keeps this
/// instance's part of the shared queue right. It connects (and migrates) with backoff while the
/// database is away; renews the claims this instance holds and drops those taken over; looks
/// for lanes whose operations an admin write changed (pokes) and reads them again; claims lanes
/// with work of the origins this instance sees online, up to `maxConcurrentPerOrigin` each; and
/// every second reads which origins hold work (so they are probed) and how large the queue is.
///
/// A bounded poll rather than LISTEN/NOTIFY: an operation stored by another instance in a lane
/// nobody holds is claimed within a tick (100 ms) by an instance that sees its origin online,
/// and one stored by this instance is claimed at once. One query every tick costs the database
/// little, and nothing is lost while a listening connection is down.
extension PostgresQueue {
    static let tickSeconds = 0.1
    static let firstBackoffSeconds = 0.2
    static let maxBackoffSeconds = 5.0

    func startKeeper() {
        metrics.storeStarted(gauges: { [self] in
            let threads = [writer, keeperThread] + readers
            return (threads.filter(\.isBusy).count, threads.count, book.withLock { $0.lanes.count })
        })
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global())
        timer.schedule(deadline: .now(), repeating: Self.tickSeconds, leeway: .milliseconds(20))
        timer.setEventHandler { [weak self] in self?.requestKeeperTick() }
        keeper.withLock { $0 = KeeperTimer(source: timer) }
        timer.resume()
    }

    /// Queues a tick on the keeper's thread unless one is queued or the backoff says wait.
    func requestKeeperTick() {
        let now = MonotonicClock.nanos()
        let go = keeperState.withLock { state -> Bool in
            guard !state.queued, now >= state.retryAt else { return false }
            state.queued = true
            return true
        }
        guard go else { return }
        keeperThread.submit { [self] connection in
            tick(connection)
            keeperState.withLock { $0.queued = false }
        }
    }

    private func tick(_ opened: Result<PostgresConnection, PostgresError>) {
        let connection: PostgresConnection
        switch opened {
        case .failure(let error):
            noteFailure(error)
            backOff()
            return
        case .success(let open):
            connection = open
        }
        if health.withLock({ $0.refused != nil }) { return }
        if !health.withLock({ $0.ready }) {
            guard case .success = migrate(.success(connection)) else {
                backOff()
                return
            }
        }
        let now = MonotonicClock.nanos()
        do throws(PostgresError) {
            let (renew, refresh) = keeperState.withLock { state -> (Bool, Bool) in
                let renew = Double(now &- state.lastRenewal) / 1e9 >= settings.leaseSeconds / 3
                let refresh = Double(now &- state.lastOriginsRefresh) / 1e9 >= 1
                if renew { state.lastRenewal = now }
                if refresh { state.lastOriginsRefresh = now }
                return (renew, refresh)
            }
            if renew { try renewClaims(on: connection) }
            if refresh { try refreshOrigins(on: connection, now: now) }
            try answerPokes(on: connection)
            try claimLanes(on: connection)
            writeLongAttempts()
            noteSuccess()
            keeperState.withLock { state in
                state.backoffSeconds = Self.firstBackoffSeconds
                state.retryAt = 0
            }
        } catch {
            noteFailure(error)
            if error.isConnectionFailure { backOff() }
        }
    }

    /// Waits longer before the next tick, up to `maxBackoffSeconds`: reconnecting to a database
    /// that is down, in steps that double.
    private func backOff() {
        keeperState.withLock { state in
            state.retryAt = MonotonicClock.nanos() + UInt64(state.backoffSeconds * 1e9)
            state.backoffSeconds = min(Self.maxBackoffSeconds, state.backoffSeconds * 2)
        }
    }

    /// Renews every claim this instance holds; a lane missing from the answer was taken over:
    /// its attempt in flight is cancelled (its new holder delivers it) and it is forgotten.
    private func renewClaims(on connection: PostgresConnection) throws(PostgresError) {
        guard book.withLock({ !$0.lanes.isEmpty }) else { return }
        let held = Set(try PostgresLanes.renew(connection, holder: holder, leaseSeconds: settings.leaseSeconds).map {
            LaneID(origin: $0.origin, lane: $0.lane)
        })
        let lost = book.withLock { book -> [(LaneID, HeldLane)] in
            let gone = book.lanes.filter { !held.contains($0.key) && !$0.value.releasing }.map(\.key)
            return gone.compactMap { id in book.remove(id).map { (id, $0) } }
        }
        for (id, lane) in lost {
            logger.warn("store_lane_lost", ["origin": id.origin, "lane": id.lane, "note": "its claim lapsed and was taken over"])
            lane.inFlight?.cancellation.cancel(.removed)
        }
    }

    /// Which origins hold unfinished work (they are probed while offline, and their lanes
    /// claimed while online), and, when it is due, how many operations the queue holds.
    private func refreshOrigins(on connection: PostgresConnection, now: UInt64) throws(PostgresError) {
        let result = try connection.execute("SELECT DISTINCT origin FROM lanes WHERE unfinished > 0")
        var origins = Set(result.rows.compactMap { row in row.first.flatMap { $0 }.flatMap { Origin.parseAbsolute($0 + "/")?.0 } })
        origins.formUnion(book.withLock { book in book.lanes.values.map(\.origin) })
        let new = originsWithWorkCache.withLock { cache -> Set<Origin> in
            defer { cache = origins }
            return origins.subtracting(cache)
        }
        for origin in new {
            reachability.register(origin)
            reachability.workStored(for: origin)
        }
        kick(new)
        // The kept counts (schema v3) are a few rows, whatever the queue's size: read every second.
        let due = now &- keeperState.withLock({ $0.lastSizeRefresh }) >= 1_000_000_000
        if due {
            keeperState.withLock { $0.lastSizeRefresh = now }
            let added = size.withLock { $0.addedSince }
            let count = try connection.execute(PostgresOperations.countAll.sql).value(0, "n").flatMap { Int($0) } ?? 0
            size.withLock { size in
                size.counted = count
                size.addedSince -= added
            }
        }
    }

    /// Reads again the lanes this instance holds whose operations an admin write changed, and
    /// says it has seen their pokes: a removed operation leaves the lane (cancelled if in
    /// flight), a retried or flushed one takes its new state, and the lane looks ahead again.
    private func answerPokes(on connection: PostgresConnection) throws(PostgresError) {
        guard book.withLock({ !$0.lanes.isEmpty }) else { return }
        let poked = try connection.execute("SELECT origin, lane, poke FROM lanes WHERE holder = $1 AND poke > seen_poke",
                                           [.text(holder)])
        for row in poked.rows.indices {
            guard let origin = poked.value(row, "origin"), let lane = poked.value(row, "lane"),
                  let poke = poked.value(row, "poke").flatMap({ Int64($0) }) else { continue }
            let laneID = LaneID(origin: origin, lane: lane)
            let ids = book.withLock { book in
                book.lanes[laneID].map { $0.ahead.map(\.id) + ($0.inFlight.map { [$0.id] } ?? []) } ?? []
            }
            var current: [UUID: OperationState] = [:]
            if !ids.isEmpty {
                let statement = PostgresOperations.stillUnfinished(ids)
                let rows = try connection.execute(statement.sql, statement.parameters)
                for index in rows.rows.indices {
                    if let summary = try? PostgresOperations.summary(rows, row: index) { current[summary.snapshot.id] = summary.snapshot.state }
                }
            }
            let removed = refresh(laneID, with: current)
            removed?.cancel(.removed)
            // A retried or flushed head is due now: its replayer, parked until the old schedule, looks again.
            if let origin = Origin.parseAbsolute(origin + "/")?.0 { kick([origin]) }
            try connection.execute("UPDATE lanes SET seen_poke = $3 WHERE origin = $1 AND lane = $2 AND holder = $4",
                                   [.text(origin), .text(lane), .int64(poke), .text(holder)])
            lookAhead(in: laneID)
        }
    }

    /// Applies what an admin write did to a held lane's operations (`current`: those still
    /// unfinished, with their states); returns the cancellation of the attempt in flight when
    /// its operation is gone.
    func refresh(_ laneID: LaneID, with current: [UUID: OperationState]) -> CallCancellation? {
        book.withLock { book -> CallCancellation? in
            guard var lane = book.lanes[laneID] else { return nil }
            lane.ahead = lane.ahead.compactMap { ahead in
                guard let state = current[ahead.id] else { return nil }
                var updated = ahead
                var mine = ahead.snapshot.state
                // What an admin write changes; the attempt count stays this holder's.
                mine.nextAttemptAt = state.nextAttemptAt
                mine.retryCount = state.retryCount
                mine.lastError = state.lastError
                updated.snapshot.state = mine
                return updated
            }
            lane.exhausted = false
            var cancelled: CallCancellation?
            if let flying = lane.inFlight, current[flying.id] == nil, !flying.cancellation.isCancelled {
                cancelled = flying.cancellation
            }
            book.lanes[laneID] = lane
            return cancelled
        }
    }

    /// Claims lanes with work of the origins this instance sees online, up to
    /// `maxConcurrentPerOrigin` each, and has each look ahead.
    private func claimLanes(on connection: PostgresConnection) throws(PostgresError) {
        guard !forcedOffline else { return }
        let origins = originsWithWorkCache.withLock { $0 }.filter { reachability.isOnline($0) }
        for origin in origins {
            let room = settings.maxConcurrentPerOrigin - book.withLock { $0.held(origin: origin.description) }
            guard room > 0 else { continue }
            let claims = try PostgresLanes.claim(connection, origin: origin.description, holder: holder,
                                                 leaseSeconds: settings.leaseSeconds, limit: room)
            guard !claims.isEmpty else { continue }
            let ids = book.withLock { book -> [LaneID] in
                claims.map { claim in
                    let id = LaneID(origin: claim.origin, lane: claim.lane)
                    book.add(HeldLane(claim: claim, origin: origin), as: id)
                    return id
                }
            }
            for claim in claims where claim.takenOver {
                metrics.laneTakenOver()
                logger.info("store_lane_taken_over", ["origin": claim.origin, "lane": claim.lane,
                                                      "note": "the instance that held it let its claim lapse"])
            }
            for id in ids { lookAhead(in: id) }
        }
    }

    /// At a clean stop: lets every lane go (the attempts of what was taken ahead and never sent
    /// were never counted: a clean release clears the lane's mark).
    func releaseAll(on connection: PostgresConnection) {
        let lanes = book.withLock { book -> [HeldLane] in
            defer { book = LaneBook() }
            return Array(book.lanes.values)
        }
        for lane in lanes {
            do throws(PostgresError) {
                try PostgresLanes.release(connection, lane.claim, holder: holder)
            } catch {
                logger.warn("store_release_failed", ["origin": lane.claim.origin, "error": "\(error)"])
            }
        }
    }
}

import Foundation
import OutboxHTTP
import OutboxModel
import OutboxQueue

/// The admin API's view of the shared queue: every instance shows and manages all of it
/// (SPEC §9). Reads go to the database; a write that changes operations of a lane another
/// instance holds pokes the lane, and a removal waits until that holder has seen it, so an
/// operation reported removed is never sent afterwards.
extension PostgresQueue {
    package var connectivityMode: String { forcedOffline ? "offline" : "auto" }

    package var maxRetries: Int { settings.maxRetries }

    package var origins: [OriginStatus] { reachability.statuses }

    package var store: StoreStatus {
        let (reachable, lastError) = health.withLock { health in
            (health.ready && health.reachable && health.refused == nil, health.refused ?? health.lastError)
        }
        return StoreStatus(kind: "postgres", reachable: reachable, lastError: lastError.map { "database \(target): \($0)" },
                           instance: instance)
    }

    package var storageBytes: Int {
        get async {
            let value = await scalar("SELECT pg_total_relation_size('operations') AS n")
            return Int(value ?? 0)
        }
    }

    package var storageDamagedRecords: Int { 0 }

    package var unavailable: String? { unavailableReason }

    package var counts: [OperationStatus: Int] {
        get async {
            let statement = PostgresOperations.countsByStatus
            let flying = Array(inFlightStates().keys)
            let stillPending = PostgresOperations.pendingAmong(flying)
            guard case .success(let (rows, pending)) = await read({ connection throws(PostgresError) in
                let results = try connection.pipeline([(statement.sql, statement.parameters), (stillPending.sql, stillPending.parameters)])
                return (results[0], Int(results[1].value(0, "n") ?? "") ?? 0)
            }) else { return [:] }
            var counts: [OperationStatus: Int] = [:]
            for row in rows.rows.indices {
                if let status = rows.value(row, "status").flatMap(OperationStatus.init(rawValue:)),
                   let count = rows.value(row, "n").flatMap({ Int($0) }) {
                    counts[status] = count
                }
            }
            // In flight here, its write not committed yet: inProgress, as this instance's other views say.
            if pending > 0 {
                counts[.pending, default: 0] -= pending
                counts[.inProgress, default: 0] += pending
            }
            return counts
        }
    }

    package var oldestPendingAgeSeconds: Double? {
        get async {
            let statement = PostgresOperations.oldestUnfinished
            guard let oldest = await scalar(statement.sql, statement.parameters) else { return nil }
            return max(0, Double(WallClock.millis() - oldest) / 1000)
        }
    }

    package func unfinishedCount(origin: Origin) async -> Int {
        let statement = PostgresOperations.unfinished(origin: origin)
        return Int(await scalar(statement.sql, statement.parameters) ?? 0)
    }

    package func activeLanes(origin: Origin) async -> Int {
        let statement = PostgresOperations.inFlightLanes(origin: origin)
        guard case .success(let rows) = await read({ connection throws(PostgresError) in
            try connection.execute(statement.sql, statement.parameters)
        }) else { return 0 }
        var lanes = Set(rows.rows.compactMap { $0.first.flatMap { $0 } })
        // Lanes with an attempt in flight here whose write has not committed yet.
        book.withLock { book in
            for id in book.byOrigin[origin.description] ?? [] where book.lanes[id]?.inFlight != nil { lanes.insert(id.lane) }
        }
        return lanes.count
    }

    package func list(status: OperationStatus?, tag: String?, origin: String?, orderingKey: String?, after: UUID?,
                      limit: Int) async -> (items: [OperationSnapshot], next: UUID?) {
        let originValue = origin.flatMap { Origin.parseAbsolute($0 + "/")?.0 }
        if origin != nil && originValue == nil { return ([], nil) }
        // One more than asked for says whether a next page exists.
        let statement = PostgresOperations.list(status: status, tag: tag, origin: originValue, orderingKey: orderingKey,
                                                after: after, limit: limit + 1)
        guard case .success(let rows) = await read({ connection throws(PostgresError) in
            try connection.execute(statement.sql, statement.parameters)
        }) else { return ([], nil) }
        var items: [OperationSnapshot] = []
        let flying = inFlightStates()
        for row in rows.rows.indices.prefix(limit) {
            do {
                let decoded = try PostgresOperations.summary(rows, row: row)
                var snapshot = decoded.snapshot
                snapshot.instance = decoded.instance
                items.append(seenHere(snapshot, flying))
            } catch {
                logger.error("store_read_failed", ["error": "\(error)"])
            }
        }
        return (items, rows.rows.count > limit ? items.last?.id : nil)
    }

    package func view(_ id: UUID, visitingBody visitBody: (UnsafeRawBufferPointer) -> Void) async -> OperationView? {
        let statement = PostgresOperations.whole(id)
        guard case .success(let rows) = await read({ connection throws(PostgresError) in
            try connection.execute(statement.sql, statement.parameters)
        }), !rows.rows.isEmpty else { return nil }
        let whole: (PostgresOperations.Row, OperationRequest)
        do {
            whole = try PostgresOperations.whole(rows, row: 0)
        } catch {
            logger.error("store_read_failed", ["id": id.lowercasedText, "error": "\(error)"])
            return nil
        }
        var snapshot = whole.0.snapshot
        snapshot.instance = whole.0.instance
        snapshot = seenHere(snapshot, inFlightStates())
        let body = whole.1.body
        body.withUnsafeBytes { visitBody($0) }
        return OperationView(snapshot: snapshot, headers: whole.1.headers, body: body)
    }

    package func retry(_ id: UUID) async -> Result<OperationSnapshot, AdminRefusal> {
        let outcome = await read({ connection throws(PostgresError) -> Result<Poke?, AdminRefusal> in
            let locked = PostgresOperations.lockedStatus(id)
            let found = try connection.pipeline([("BEGIN", []), (locked.sql, locked.parameters)])[1]
            guard !found.rows.isEmpty, let status = found.value(0, "status").flatMap(OperationStatus.init(rawValue:)),
                  let origin = found.value(0, "origin"), let lane = found.value(0, "lane") else {
                try connection.execute("ROLLBACK")
                return .failure(.notFound)
            }
            guard QueueRules.isRetryable(status) else {
                try connection.execute("ROLLBACK")
                return .failure(.notRetryable(status))
            }
            let statements = PostgresOperations.retry(id, wasFinished: status.isFinished, origin: origin, lane: lane)
            let results = try connection.pipeline(statements.map { ($0.sql, $0.parameters) } + [("COMMIT", [])])
            return .success(Self.poke(from: results[1], row: 0, lane: LaneID(origin: origin, lane: lane)))
        })
        switch outcome {
        case .failure(let error):
            logger.warn("store_failed", ["operation": "retry", "id": id.lowercasedText, "error": "\(error)"])
            return .failure(.notFound)
        case .success(.failure(let refusal)):
            return .failure(refusal)
        case .success(.success(let poke)):
            if let poke { laneGotWork(poke.lane) }
            requestKeeperTick()
            guard let view = await view(id, visitingBody: { _ in }) else { return .failure(.notFound) }
            announce(id, view.snapshot.state, origin: view.snapshot.origin, orderingKey: view.snapshot.orderingKey)
            return .success(view.snapshot)
        }
    }

    package func delete(_ id: UUID) async -> Bool {
        await removeAll(.init("id = $1::uuid", [.text(id.lowercasedText)])) == 1
    }

    package func deleteAll(status: OperationStatus?) async -> Int {
        if let status { return await removeAll(.init("status = $1", [.text(status.rawValue)])) }
        return await removeAll(.init("true"))
    }

    package func prune(createdBefore cutoff: Int64) async -> Int {
        await removeAll(.init("created_at < $1", [.int64(cutoff)]))
    }

    package func flush() async {
        await clearSchedules(PostgresOperations.flush)
    }

    package func wakeHeld(origin: Origin) async {
        await clearSchedules(PostgresOperations.wakeHeld(origin: origin))
    }

    /// Runs a statement that clears schedules and answers their lanes, then has the lanes
    /// this instance holds clear theirs in memory too (the others at their holders' next tick).
    private func clearSchedules(_ statement: PostgresOperations.Statement) async {
        let result = await write([statement])
        if case .success(let results) = result {
            let lanes = results[0]
            for row in lanes.rows.indices {
                guard let origin = lanes.value(row, "origin"), let lane = lanes.value(row, "lane") else { continue }
                // This instance's own lanes take the cleared schedules now; others' at their next tick.
                _ = refreshSchedules(LaneID(origin: origin, lane: lane))
            }
        }
        kickEverything()
    }

    package func waitUntilDrained(timeoutSeconds: Double) async -> Bool {
        let deadline = MonotonicClock.nanos() + UInt64(max(0, timeoutSeconds) * 1e9)
        let statement = PostgresOperations.unfinishedTotal
        while true {
            if let left = await scalar(statement.sql, statement.parameters), left == 0 { return true }
            // Looked once more after the deadline, above, before giving up.
            if MonotonicClock.nanos() >= deadline { return false }
            try? await Task.sleep(nanoseconds: UInt64(Self.drainPollSeconds * 1e9))
        }
    }

    /// How often `drain` looks at the shared queue's unfinished count: the fleet's work ends
    /// on other instances too, which no event here tells.
    static let drainPollSeconds = 0.05

    package func setForcedOffline(_ value: Bool) {
        let was = offline.exchange(value, ordering: .relaxed)
        if was != value { events?.publish("connectivity", .object([("mode", .string(value ? "offline" : "auto"))])) }
        if !value { kickEverything() }
    }

    package func maintain() async {
        reachability.forgetIdle()
        guard unavailableReason == nil else { return }
        let now = WallClock.millis()
        let cutoff = QueueRules.retentionCutoff(now: now, retentionSeconds: settings.retentionSeconds)
        let retired = await removeAll(PostgresOperations.retention(cutoff: cutoff), poking: false)
        if retired > 0 { logger.info("retention_removed", ["operations": String(retired)]) }
        expireTakenAhead(now: now, ttlSeconds: settings.ttlSeconds)
        let expire = PostgresOperations.expire(cutoff: QueueRules.expiryCutoff(now: now, ttlSeconds: settings.ttlSeconds),
                                               limit: Self.removalBatch, now: now)
        _ = await write([expire])
    }

    /// Operations removed per statement of a bulk removal.
    static let removalBatch = 1000

    // MARK: Removal

    /// Removes what `condition` chooses (present when the removal starts), a batch per
    /// statement; answers how many. Lanes held by this instance drop the removed operations
    /// before this returns (an attempt in flight is cancelled); lanes held by another live
    /// instance are poked, and this waits (up to `leaseSeconds`) until each has seen it.
    private func removeAll(_ selection: PostgresOperations.Selection, poking: Bool = true) async -> Int {
        let last = PostgresOperations.lastSeq
        guard let until = await scalar(last.sql, last.parameters) else { return 0 }
        var removed = 0
        while true {
            let statement = PostgresOperations.remove(selection, until: until, limit: Self.removalBatch)
            guard case .success(let results) = await write([statement]), let rows = results.first, !rows.rows.isEmpty,
                  let gone = rows.value(0, "removed").flatMap({ try? JSONReader.parse(Array($0.utf8)) })?.arrayValue,
                  let lanes = rows.value(0, "lanes").flatMap({ try? JSONReader.parse(Array($0.utf8)) })?.arrayValue else {
                return removed
            }
            removed += gone.count
            var cancelled: [CallCancellation] = []
            var removedIDs: [LaneID: Set<UUID>] = [:]
            for item in gone {
                guard let fields = item.arrayValue, fields.count == 6, let idText = fields[0].stringValue, let id = UUID(uuidString: idText),
                      let originText = fields[1].stringValue, let origin = Origin.parseAbsolute(originText + "/")?.0,
                      let lane = fields[2].stringValue else { continue }
                removedIDs[LaneID(origin: originText, lane: lane), default: []].insert(id)
                announceRemoved(id, retryCount: fields[4].intValue ?? 0, lastError: fields[5].stringValue, origin: origin,
                                orderingKey: lane.isEmpty ? nil : lane)
            }
            for (laneID, ids) in removedIDs { cancelled += drop(ids, from: laneID) }
            for cancellation in cancelled { cancellation.cancel(.removed) }
            if poking {
                for item in lanes {
                    guard let fields = item.arrayValue, fields.count == 5, let origin = fields[0].stringValue,
                          let lane = fields[1].stringValue, let other = fields[2].stringValue, other != holder,
                          let poke = fields[3].intValue, fields[4].boolValue == true else { continue }
                    await waitForPoke(LaneID(origin: origin, lane: lane), holder: other, poke: Int64(poke))
                }
            }
            if gone.count < Self.removalBatch { return removed }
        }
    }

    /// Drops removed operations from a lane this instance holds; returns the cancellation of
    /// the attempt in flight if it was one of them.
    private func drop(_ ids: Set<UUID>, from laneID: LaneID) -> [CallCancellation] {
        book.withLock { book -> [CallCancellation] in
            guard var lane = book.lanes[laneID] else { return [] }
            lane.ahead.removeAll { ids.contains($0.id) }
            var cancelled: [CallCancellation] = []
            if let flying = lane.inFlight, ids.contains(flying.id) { cancelled.append(flying.cancellation) }
            book.lanes[laneID] = lane
            return cancelled
        }
    }

    /// Clears the schedules of the operations a held lane took ahead (a flush).
    private func refreshSchedules(_ laneID: LaneID) -> Bool {
        book.withLock { book -> Bool in
            guard var lane = book.lanes[laneID] else { return false }
            for index in lane.ahead.indices {
                if let due = QueueRules.flushed(lane.ahead[index].snapshot.state) { lane.ahead[index].snapshot.state = due }
            }
            book.lanes[laneID] = lane
            return true
        }
    }

    /// Waits until `holder` has seen `poke` of `laneID`, has let the lane go, or has lost its
    /// lease; at most `leaseSeconds` (by then its lease has lapsed unless it renewed it, and a
    /// holder that renews also answers pokes).
    private func waitForPoke(_ laneID: LaneID, holder other: String, poke: Int64) async {
        let deadline = MonotonicClock.nanos() + UInt64(settings.leaseSeconds * 1e9)
        let statement = PostgresOperations.pokeSettled(origin: laneID.origin, lane: laneID.lane, holder: other, poke: poke)
        while true {
            let settled = await read({ connection throws(PostgresError) in
                try connection.execute(statement.sql, statement.parameters).value(0, "settled") == "t"
            })
            if case .success(true) = settled { return }
            if case .failure = settled { return }
            if MonotonicClock.nanos() >= deadline { return }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    /// What a holder's poke says, from the `RETURNING holder, poke, live` of a lane's row.
    struct Poke: Sendable {
        var lane: LaneID
        var holder: String?
        var poke: Int64
        var live: Bool
    }

    static func poke(from result: PostgresResult, row: Int, lane: LaneID) -> Poke? {
        guard row < result.rows.count, let poke = result.value(row, "poke").flatMap({ Int64($0) }) else { return nil }
        return Poke(lane: lane, holder: result.value(row, "holder"), poke: poke, live: result.value(row, "live") == "t")
    }

    /// One number from the database (the first column of the first row), nil when it failed
    /// or gave none.
    private func scalar(_ sql: String, _ parameters: [PostgresValue] = []) async -> Int64? {
        guard case .success(let value) = await read({ connection throws(PostgresError) in
            try connection.execute(sql, parameters).rows.first?.first.flatMap { $0 }.flatMap { Int64($0) }
        }) else { return nil }
        return value
    }
}

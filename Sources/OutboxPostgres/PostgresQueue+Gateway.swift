import Foundation
import OutboxModel
import OutboxQueue

/// The proxy's view of the shared queue: its questions are asked in one round trip on a
/// reader's connection (`lookUp`), and a write is stored by the group commit, answered after
/// its `COMMIT` with the operation that holds its key, whichever instance stored it.
extension PostgresQueue {
    package var readsAtOnce: Bool { false }

    /// Never asked: the proxy asks `lookUp` of a store that does not read at once. Answers the
    /// careful way (the lane holds work, no operation holds the key) all the same.
    package func hasQueued(_ origin: Origin, orderingKey: String?) -> Bool { true }

    package func operation(withKey idempotencyKey: String, origin: Origin) throws(QueueReadError) -> OperationSnapshot? { nil }

    package func resolveDependency(_ reference: String, origin: Origin) -> UUID? { nil }

    package func lookUp(_ question: QueueQuestion, completion: @escaping @Sendable (QueueFacts) -> Void) {
        if let reason = unavailableReason {
            completion(.unavailable(reason))
            return
        }
        var statements: [PostgresGroupCommit.Statement] = []
        if let key = question.key { statements.append(PostgresOperations.keyHolder(key, origin: question.origin)) }
        if question.laneMatters {
            statements.append(PostgresOperations.laneUnfinished(origin: question.origin, orderingKey: question.orderingKey))
        }
        if let reference = question.dependsOn { statements.append(PostgresOperations.dependency(reference, origin: question.origin)) }
        guard !statements.isEmpty else {
            completion(QueueFacts(existing: .success(nil), laneHasQueued: false, dependency: nil))
            return
        }
        let batch = statements
        read({ connection throws(PostgresError) in
            try connection.pipeline(batch.map { ($0.sql, $0.parameters) })
        }, completion: { [self] result in
            switch result {
            case .failure(let error):
                if error.isConnectionFailure || error.sqlState == "57014" {
                    completion(.unavailable("database \(target): \(error)"))
                } else {
                    // The key's row cannot be read: the proxy answers 507 rather than store or
                    // forward a write that may be a repeat.
                    completion(QueueFacts(existing: .failure(QueueReadError(id: UUID(), reason: "\(error)")), laneHasQueued: true,
                                          dependency: nil))
                }
            case .success(let results):
                var next = 0
                var existing: Result<OperationSnapshot?, QueueReadError> = .success(nil)
                if question.key != nil {
                    let rows = results[next]
                    next += 1
                    if !rows.rows.isEmpty {
                        do throws(PostgresOperations.DecodeError) {
                            let row = try PostgresOperations.withAnswers(rows, row: 0)
                            var snapshot = row.snapshot
                            snapshot.instance = row.instance
                            existing = .success(snapshot)
                        } catch {
                            let id = rows.value(0, "id").flatMap { UUID(uuidString: $0) } ?? UUID()
                            logger.error("store_read_failed", ["id": id.lowercasedText, "error": "\(error)"])
                            existing = .failure(QueueReadError(id: id, reason: "\(error)"))
                        }
                    }
                }
                var laneHasQueued = false
                if question.laneMatters {
                    laneHasQueued = (results[next].value(0, "unfinished").flatMap { Int64($0) } ?? 0) > 0
                    next += 1
                }
                var dependency: UUID??
                if question.dependsOn != nil {
                    dependency = .some(results[next].value(0, "id").flatMap { UUID(uuidString: $0) })
                }
                completion(QueueFacts(existing: existing, laneHasQueued: laneHasQueued, dependency: dependency))
            }
        })
    }

    package func enqueue(_ request: OperationRequest, freshKey: UUID?,
                         completion: @escaping @Sendable (Result<OperationSnapshot, EnqueueError>) -> Void) {
        if let reason = unavailableReason {
            completion(.failure(.unavailable(reason)))
            return
        }
        let count = size.withLock { $0.counted + $0.addedSince }
        if let refusal = QueueRules.refusal(count: count, maxOperations: settings.maxOperations) {
            completion(.failure(refusal))
            return
        }
        var request = request
        // A key made up by the proxy comes without its digest (it cannot be repeated before the
        // 202 names it); the row keeps one, since another instance may be asked the repeat.
        if request.fingerprint.isEmpty { request.fingerprint = IdempotencyKey.fingerprint(of: request) }
        if let spilled = request.spilledBody {
            // Its row carries the body: read once here, off the writer's thread.
            switch spilled.bytes() {
            case .success(let bytes):
                request.body = bytes
                request.spilledBody = nil
            case .failure(let error):
                completion(.failure(.storage("the request body could not be read back: \(error)")))
                return
            }
        }
        let laneID = LaneID(request.origin, orderingKey: request.orderingKey)
        size.withLock { $0.addedSince += 1 }
        let fingerprint = request.fingerprint
        let id = request.id
        let added = request
        add(request) { [self] result in
            switch result {
            case .failure(let error):
                size.withLock { $0.addedSince -= 1 }
                if !error.isConnectionFailure {
                    logger.error("store_failed", ["operation": "enqueue", "id": id.lowercasedText, "error": "\(error)"])
                }
                completion(.failure(Self.enqueueError(error)))
            case .success(.stored):
                stored(OperationSnapshot(added, state: OperationState()), laneID, completion)
            case .success(.holder(let rows)):
                let holder: OperationSnapshot
                do throws(PostgresOperations.DecodeError) {
                    guard !rows.rows.isEmpty else { throw PostgresOperations.DecodeError(column: "id", value: nil) }
                    holder = try PostgresOperations.summary(rows, row: 0).snapshot
                } catch {
                    completion(.failure(.storage("the stored operation could not be read back: \(error)")))
                    return
                }
                guard holder.id == id else {
                    // Another request holds the key, stored first by this instance or another.
                    size.withLock { $0.addedSince -= 1 }
                    completion(holder.fingerprint == fingerprint ? .success(holder) : .failure(.keyConflict))
                    return
                }
                stored(holder, laneID, completion)
            }
        }
    }

    /// `operation` was stored by this request: it is counted, announced and made due.
    private func stored(_ operation: OperationSnapshot, _ laneID: LaneID,
                        _ completion: @Sendable (Result<OperationSnapshot, EnqueueError>) -> Void) {
        metrics.enqueued()
        announce(operation.id, operation.state, origin: operation.origin, orderingKey: operation.orderingKey)
        originsWithWorkCache.withLock { _ = $0.insert(operation.origin) }
        reachability.workStored(for: operation.origin)
        // The keeper claims lanes of origins online only: for another, a tick per add would
        // wake its thread thousands of times a second to do nothing.
        laneGotWork(laneID, claimNow: !forcedOffline && reachability.isOnline(operation.origin),
                    rank: operation.priority.laneRank(attempted: false))
        completion(.success(operation))
    }

    /// An operation of lane rank `rank` was added to `laneID` (nil: operations changed by an
    /// admin write): a lane this instance holds looks ahead again if it is short of work or the
    /// operation goes before some of what it took, else at its next refill (a look per add
    /// would take more and more ahead, counting attempts, while the lane waits); one it does not
    /// hold is claimed at the next tick, now unless `claimNow` is false (then at the keeper's next
    /// regular tick).
    func laneGotWork(_ laneID: LaneID, claimNow: Bool = true, rank: Int? = nil) {
        let (held, look) = book.withLock { book -> (Bool, Bool) in
            book.update(laneID) { lane -> (Bool, Bool) in
                lane.exhausted = false
                guard let rank, lane.ahead.count >= Self.refillBelow else { return (true, true) }
                return (true, lane.ahead.contains { $0.rank < rank })
            } ?? (false, false)
        }
        if held { if look { lookAhead(in: laneID) } } else if claimNow { requestKeeperTick() }
    }
}

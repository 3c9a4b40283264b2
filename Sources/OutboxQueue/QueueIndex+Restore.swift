import Foundation
import OutboxModel

/// Rebuilding the index from the log at startup. The records are replayed in log order with
/// only what depends on that order (duplicate checks, later states, removals); counts, lane
/// heaps, schedules and dependencies are built once at the end by `finishRestoring()`,
/// from the final statuses, instead of being moved on every record.
///
/// Between the first `restore` call and `finishRestoring()` only the `restore…` calls may
/// be used: the lane structures are not kept up to date until then.
extension QueueIndex {
    /// Adds a restored operation, in log order. Throws for an id, or a key of the same origin,
    /// already indexed (the first record holding it wins), and for an operation without an
    /// origin when none was restored before it.
    public mutating func restore(_ insertion: Insertion, locator: Locator) throws(QueueIndexError) {
        // The origin first, before the checks: a refused record still sets the origin that
        // the records after it (with `origin` nil) share.
        let originNumber: UInt32
        if let origin = insertion.origin {
            originNumber = intern(origin)
        } else if let last = lastOrigin {
            originNumber = last
        } else {
            throw .unknownOrigin(insertion.id)
        }
        let keyHash = Self.keyHash(insertion.keyHash, origin: originNumber)
        try checkNew(insertion.id, idHash: insertion.idHash, key: insertion.key, origin: originNumber, keyHash: keyHash)
        let lane = lane(of: originNumber, orderingKey: insertion.orderingKey)  // on its own: see `insert`
        var restored = record(insertion, lane: lane, locator: locator)
        restored.take(insertion.state)
        restored.status = insertion.state.status
        _ = append(consume restored, idHash: insertion.idHash, keyHash: keyHash)
    }

    /// Takes a later state of operation `id` (and lets `relocate` change its locator); false
    /// when `id` is not indexed (deleted before, or never indexed).
    @discardableResult
    public mutating func restoreState(_ id: UUID, _ state: IndexedState, relocate: (inout Locator) -> Void) -> Bool {
        guard let slot = slot(of: id) else { return false }
        relocate(&records[Int(slot)].locator)
        records[Int(slot)].take(state)
        records[Int(slot)].status = state.status
        return true
    }

    /// Removes operation `id`, if indexed, and returns its locator.
    @discardableResult
    public mutating func restoreRemoval(_ id: UUID) -> Locator? {
        let hash = Self.hash(id)
        guard let slot = slot(of: id, hash: hash) else { return nil }
        records[Int(slot)].status = nil
        forget(slot, hash: hash)
        return records[Int(slot)].locator
    }

    /// Builds the lane structures from the restored records (dropping tombstones first when
    /// they outnumber the live ones); the index is then ready for every other call.
    public mutating func finishRestoring() {
        if tombstones > 1024, tombstones > count {
            compact()
        } else {
            rebuildLanes()
        }
    }
}

extension QueueIndex.Record {
    /// Takes the fields of `state` other than the status, which moves counts and lanes and is
    /// the caller's to set.
    mutating func take(_ state: QueueIndex.IndexedState) {
        retryCount = state.retryCount
        attempts = state.attempts
        lastAttemptAt = state.lastAttemptAt
        nextAttemptAt = state.nextAttemptAt
        // Most records have neither an error nor a box: no box to look into.
        if state.lastError != nil || extras != nil { lastError = state.lastError }
    }
}

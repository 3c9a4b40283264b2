import Foundation
import OutboxModel

extension QueueIndex {
    /// What `origin`'s lane should do at `now` (ms since the epoch); see the type's comment for
    /// the rules. O(1) apart from listing `dependencyFailed`: the lane keeps one heap per
    /// priority of the operations ready to go, so it never scans its queue.
    public func nextReady(origin: Origin, now: Int64) -> LaneStep {
        guard let number = originNumbers[origin] else { return LaneStep(next: .idle) }
        let lane = lanes[Int(number)]
        let doomed = lane.doomed.sorted().map { records[Int($0)].id }
        if lane.inFlight > 0 { return LaneStep(next: .busy, dependencyFailed: doomed) }
        for priority in OperationPriority.allCases.reversed() {
            guard let head = lane.heaps[priority.index].first else { continue }
            let notBefore = records[Int(head)].nextAttemptAt
            if notBefore != Self.none, notBefore > now {
                return LaneStep(next: .wait(until: notBefore), dependencyFailed: doomed)
            }
            return LaneStep(next: .deliver(records[Int(head)].id), dependencyFailed: doomed)
        }
        return LaneStep(next: .idle, dependencyFailed: doomed)
    }

    /// Takes `state` for the record at `slot`, then re-places what waits for it.
    mutating func apply(_ state: OperationState, to slot: Int32) {
        let index = Int(slot)
        records[index].retryCount = UInt32(clamping: state.retryCount)
        records[index].lastAttemptAt = state.lastAttemptAt ?? Self.none
        records[index].nextAttemptAt = state.nextAttemptAt ?? Self.none
        records[index].lastError = state.lastError.map { $0.count > Self.maxErrorLength ? String($0.prefix(Self.maxErrorLength)) : $0 }
        setStatus(state.status, of: slot)
        replaceDependents(of: slot)
    }

    /// Moves the record at `slot` to `status` (nil: removed), keeping counts, lanes and the
    /// oldest-unfinished hint right.
    mutating func setStatus(_ status: OperationStatus?, of slot: Int32) {
        let index = Int(slot)
        let lane = Int(records[index].origin)
        unplace(slot)
        if let old = records[index].status {
            statusCounts[old.index] -= 1
            lanes[lane].counts[old.index] -= 1
        }
        records[index].status = status
        if let status {
            statusCounts[status.index] += 1
            lanes[lane].counts[status.index] += 1
            if !status.isFinished, index < oldestUnfinishedHint { oldestUnfinishedHint = index }
        }
        place(slot)
        advanceOldestUnfinishedHint()
        lanesToWake.insert(UInt32(lane))
    }

    /// Puts the record at `slot` where its status and its dependency's status say.
    mutating func place(_ slot: Int32) {
        let index = Int(slot)
        let lane = Int(records[index].origin)
        switch records[index].status {
        case nil, .completed, .failed, .conflict:
            records[index].placement = .none
        case .inProgress:
            lanes[lane].inFlight += 1
            records[index].placement = .inFlight
        case .pending:
            if let dependency = records[index].dependsOn, let dependencySlot = self.slot(of: dependency),
               dependencySlot != slot, let dependencyStatus = records[Int(dependencySlot)].status,
               dependencyStatus != .completed {
                dependents[dependencySlot, default: []].append(slot)
                if dependencyStatus.isFinished {
                    lanes[lane].doomed.insert(slot)
                    records[index].placement = .doomed
                } else {
                    records[index].placement = .waiting
                }
            } else {
                lanes[lane].heaps[records[index].priority.index].insert(slot, positions: &heapPositions)
                records[index].placement = .ready
            }
        }
    }

    /// Takes the record at `slot` out of every lane structure. Its dependency, if it waits for
    /// one, is still indexed: removal re-places dependents before their dependency disappears.
    mutating func unplace(_ slot: Int32) {
        let index = Int(slot)
        let lane = Int(records[index].origin)
        switch records[index].placement {
        case .none:
            break
        case .ready:
            lanes[lane].heaps[records[index].priority.index].remove(slot, positions: &heapPositions)
        case .inFlight:
            lanes[lane].inFlight -= 1
        case .waiting, .doomed:
            if records[index].placement == .doomed { lanes[lane].doomed.remove(slot) }
            if let dependency = records[index].dependsOn, let dependencySlot = self.slot(of: dependency) {
                dependents[dependencySlot]?.removeAll { $0 == slot }
                if dependents[dependencySlot]?.isEmpty == true { dependents[dependencySlot] = nil }
            }
        }
        records[index].placement = .none
    }

    /// Re-places the operations waiting for (or doomed by) the record at `slot` after its
    /// status changed or it was removed.
    mutating func replaceDependents(of slot: Int32) {
        guard let waiting = dependents.removeValue(forKey: slot) else { return }
        for dependent in waiting {
            let index = Int(dependent)
            if records[index].placement == .doomed { lanes[Int(records[index].origin)].doomed.remove(dependent) }
            records[index].placement = .none
            place(dependent)
            lanesToWake.insert(records[index].origin)
        }
    }

    mutating func advanceOldestUnfinishedHint() {
        while oldestUnfinishedHint < records.count {
            if let status = records[oldestUnfinishedHint].status, !status.isFinished { return }
            oldestUnfinishedHint += 1
        }
    }

    /// Drops tombstones and rebuilds every derived structure; record order (creation order)
    /// and sequences are kept, so lanes and cursors behave as before.
    mutating func compact() {
        records.removeAll { $0.status == nil }
        tombstones = 0
        heapPositions = [Int32](repeating: -1, count: records.count)
        dependents = [:]
        statusCounts = [Int](repeating: 0, count: OperationStatus.allCases.count)
        for lane in lanes.indices { lanes[lane] = Lane() }
        let slots = (0..<Int32(records.count))
        ids.rebuild(capacityFor: records.count, slots: slots, hashOf: { [records] in Self.hash(records[Int($0)].id) })
        keys.rebuild(capacityFor: records.count, slots: slots, hashOf: { [records] in records[Int($0)].key.hashValue })
        for slot in slots {
            let index = Int(slot)
            records[index].placement = .none
            if let status = records[index].status {
                statusCounts[status.index] += 1
                lanes[Int(records[index].origin)].counts[status.index] += 1
            }
        }
        for slot in slots { place(slot) }
        oldestUnfinishedHint = 0
        advanceOldestUnfinishedHint()
        lanesToWake.formUnion(0..<UInt32(origins.count))
    }
}

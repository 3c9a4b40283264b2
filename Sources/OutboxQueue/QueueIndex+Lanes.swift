import Foundation
import OutboxModel

extension QueueIndex {
    /// What `origin`'s replay should do next at `now` (ms since the epoch), its busy lanes
    /// aside; see the type's comment for the rules. Lanes whose backoff has ended by `now`
    /// join the ready queue first (in the order they became due), then the lane that has
    /// waited longest delivers its head. Mutating only to move those lanes: the delivered lane
    /// leaves the ready queue when its operation goes `inProgress`, so asking twice without
    /// starting it answers the same. O(log lanes) per lane moved, plus listing
    /// `dependencyFailed`.
    public mutating func nextReady(origin: Origin, now: Int64) -> LaneStep {
        guard let number = originNumbers[origin] else { return LaneStep(next: .idle) }
        let originIndex = Int(number)
        while let due = originLanes[originIndex].backoff.first, due.key <= now {
            originLanes[originIndex].backoff.remove(slot: due.slot, positions: &lanePositions)
            join(.ready, lane: due.lane)
        }
        let lanesOfOrigin = originLanes[originIndex]
        let doomed = lanesOfOrigin.doomed.sorted().map { records[Int($0)].id }
        if let next = lanesOfOrigin.ready.first, let head = lanes[next.slot].heaps.head {
            return LaneStep(next: .deliver(records[Int(head)].id), dependencyFailed: doomed)
        }
        if let waiting = lanesOfOrigin.backoff.first {
            return LaneStep(next: .wait(until: waiting.key), dependencyFailed: doomed)
        }
        return LaneStep(next: lanesOfOrigin.active > 0 ? .busy : .idle, dependencyFailed: doomed)
    }

    /// The lane of `id`: its origin and ordering key, without building the whole entry.
    public func lane(of id: UUID) -> (origin: Origin, orderingKey: String?)? {
        guard let slot = slot(of: id) else { return nil }
        let lane = lanes[Int(records[Int(slot)].lane)]
        return (origins[Int(lane.origin)], lane.orderingKey)
    }

    /// The operation `id`'s lane holds at its head while `id` is in flight, with its locator:
    /// what the origin delivers next if `id`'s attempt ends and nothing of higher priority
    /// arrives. Only a guess to read ahead with: `nextReady` still decides. Nil when `id` is
    /// unknown, its lane has nothing else ready, or another lane of the origin waits for its
    /// turn (that one goes next, and a guess per waiting lane would hold one request each).
    public func upNext(after id: UUID) -> (id: UUID, locator: Locator)? {
        guard let slot = slot(of: id) else { return nil }
        let lane = lanes[Int(records[Int(slot)].lane)]
        guard originLanes[Int(lane.origin)].ready.isEmpty, let head = lane.heaps.head, head != slot else { return nil }
        return (records[Int(head)].id, records[Int(head)].locator)
    }

    /// Whether some lane of `origin` could deliver at `now` (ready, or its backoff over), or
    /// has operations to fail behind a failed dependency: what one more replay slot would do.
    public func hasWork(origin: Origin, now: Int64) -> Bool {
        guard let number = originNumbers[origin] else { return false }
        let index = Int(number)
        if !originLanes[index].ready.isEmpty || !originLanes[index].doomed.isEmpty { return true }
        return originLanes[index].backoff.first.map { $0.key <= now } ?? false
    }

    /// Changes only where the records of `id` are (its state's record reached the disk after
    /// the state itself): nothing about its place in the lanes moves. False for an unknown id.
    @discardableResult
    public mutating func relocate(_ id: UUID, _ change: (inout Locator) -> Void) -> Bool {
        guard let slot = slot(of: id) else { return false }
        change(&records[Int(slot)].locator)
        return true
    }

    /// Takes `state` for the record at `slot`, then re-places what waits for it. Its attempt
    /// count goes down by one at most, and only as the attempt in flight ends (its outcome is
    /// made from the in-flight state, and one that never left Outbox gives its number back):
    /// any other state may be made from an older look at the operation (an admin retry), and
    /// must not lower the number its next attempt carries (`release` gives an attempt back too).
    mutating func apply(_ state: IndexedState, to slot: Int32) {
        var attempts = records[Int(slot)].attempts
        if records[Int(slot)].status == .inProgress, state.status != .inProgress, attempts > 0 { attempts -= 1 }
        records[Int(slot)].take(state)
        records[Int(slot)].attempts = max(attempts, state.attempts)
        setStatus(state.status, of: slot)
        replaceDependents(of: slot)
    }

    /// Moves the record at `slot` to `status` (nil: removed), keeping counts, lanes and the
    /// oldest-unfinished hint right.
    mutating func setStatus(_ status: OperationStatus?, of slot: Int32) {
        let index = Int(slot)
        let lane = Int(records[index].lane)
        let origin = Int(lanes[lane].origin)
        unplace(slot)
        if let old = records[index].status {
            statusCounts[old.index] -= 1
            originLanes[origin].counts[old.index] -= 1
            if !old.isFinished { lanes[lane].unfinished -= 1 }
        }
        // A mark ahead belongs to a pending operation's next attempt: taken (in progress),
        // ended or removed, the operation no longer counts among its lane's marked ones.
        if status != .pending, records[index].mark != .none {
            records[index].mark = .none
            lanes[lane].marked -= 1
        }
        // Its attempt ended (or it was removed): the lane's cancellation goes with it.
        if records[index].status == .inProgress, status != .inProgress { lanes[lane].attempt = nil }
        records[index].status = status
        if let status {
            statusCounts[status.index] += 1
            originLanes[origin].counts[status.index] += 1
            if !status.isFinished {
                lanes[lane].unfinished += 1
                if index < oldestUnfinishedHint { oldestUnfinishedHint = index }
            } else if status == .completed {
                completions.append(slot, completedAt: records[index].completedAt)
            }
        }
        place(slot)
        advanceOldestUnfinishedHint()
        lanesToWake.insert(UInt32(origin))
    }

    /// Puts the record at `slot` where its status and its dependency's status say.
    mutating func place(_ slot: Int32) {
        let index = Int(slot)
        let lane = Int(records[index].lane)
        let origin = Int(lanes[lane].origin)
        switch records[index].status {
        case nil, .completed, .failed, .conflict:
            records[index].placement = .none
        case .inProgress:
            if lanes[lane].inFlight == 0 { originLanes[origin].active += 1 }
            lanes[lane].inFlight += 1
            records[index].placement = .inFlight
        case .pending where records[index].removing:
            // Being removed: nothing may take it, and its lane goes on without it.
            records[index].placement = .none
        case .pending:
            if let dependency = records[index].extras?.dependsOn, let dependencySlot = self.slot(of: dependency),
               dependencySlot != slot, case let verdict = QueueRules.dependency(records[Int(dependencySlot)].status),
               verdict != .ready {
                dependents[dependencySlot, default: []].append(slot)
                if verdict == .doomed {
                    originLanes[origin].doomed.insert(slot)
                    records[index].placement = .doomed
                } else {
                    records[index].placement = .waiting
                }
            } else if records[index].attempted {
                let started = StartedSlot(record: slot, rank: UInt8(truncatingIfNeeded: records[index].priority.rawValue))
                lanes[lane].heaps.started.insert(started, positions: &heapPositions)
                records[index].placement = .started
            } else {
                // The priority read first: read inside the call, it costs a copy of the record.
                let priority = records[index].priority
                lanes[lane].heaps.with(priority) { $0.insert(slot, positions: &heapPositions) }
                records[index].placement = .ready
            }
        }
        reschedule(lane: UInt32(lane))
    }

    /// Takes the record at `slot` out of every lane structure. Its dependency, if it waits for
    /// one, is still indexed: removal re-places dependents before their dependency disappears.
    mutating func unplace(_ slot: Int32) {
        let index = Int(slot)
        let lane = Int(records[index].lane)
        let origin = Int(lanes[lane].origin)
        switch records[index].placement {
        case .none:
            break
        case .ready:
            lanes[lane].heaps.with(records[index].priority) { $0.remove(slot, positions: &heapPositions) }
        case .started:
            lanes[lane].heaps.started.remove(slot: Int(slot), positions: &heapPositions)
        case .inFlight:
            lanes[lane].inFlight -= 1
            if lanes[lane].inFlight == 0 { originLanes[origin].active -= 1 }
        case .waiting, .doomed:
            if records[index].placement == .doomed { originLanes[origin].doomed.remove(slot) }
            if let dependency = records[index].dependsOn, let dependencySlot = self.slot(of: dependency) {
                dependents[dependencySlot]?.removeAll { $0 == slot }
                if dependents[dependencySlot]?.isEmpty == true { dependents[dependencySlot] = nil }
            }
        }
        records[index].placement = .none
        reschedule(lane: UInt32(lane))
    }

    /// Puts `lane` where its state says in its origin's schedule: nowhere while busy or empty,
    /// in the backoff heap while its head waits for `nextAttemptAt`, else in the ready heap. A
    /// lane already ready keeps its turn (a write joining its tail must not send it to the back).
    mutating func reschedule(lane number: UInt32) {
        // Read in place: a copy of the lane would retain its key and four heap arrays.
        let wanted: Schedule
        if lanes[Int(number)].inFlight > 0 {
            wanted = .none
        } else if let head = lanes[Int(number)].heaps.head {
            wanted = records[Int(head)].nextAttemptAt == Self.none ? .ready : .backoff
        } else {
            wanted = .none
        }
        if wanted == .ready && lanes[Int(number)].schedule == .ready { return }
        leaveSchedule(lane: number)
        if wanted != .none { join(wanted, lane: number) }
    }

    private mutating func leaveSchedule(lane number: UInt32) {
        let origin = Int(lanes[Int(number)].origin)
        switch lanes[Int(number)].schedule {
        case .none: break
        case .ready: originLanes[origin].ready.remove(slot: Int(number), positions: &lanePositions)
        case .backoff: originLanes[origin].backoff.remove(slot: Int(number), positions: &lanePositions)
        }
        lanes[Int(number)].schedule = .none
    }

    /// Adds `lane` (in no heap now) to the back of its origin's ready queue, or to the backoff
    /// heap at its head's retry time.
    private mutating func join(_ schedule: Schedule, lane number: UInt32) {
        let origin = Int(lanes[Int(number)].origin)
        switch schedule {
        case .none:
            return
        case .ready:
            originLanes[origin].ready.insert(ScheduledLane(key: nextTurn, lane: number), positions: &lanePositions)
            nextTurn += 1
        case .backoff:
            guard let head = lanes[Int(number)].heaps.head else { return }
            let due = records[Int(head)].nextAttemptAt
            originLanes[origin].backoff.insert(ScheduledLane(key: due, lane: number), positions: &lanePositions)
        }
        lanes[Int(number)].schedule = schedule
    }

    /// Re-places the operations waiting for (or doomed by) the record at `slot` after its
    /// status changed or it was removed.
    mutating func replaceDependents(of slot: Int32) {
        guard let waiting = dependents.removeValue(forKey: slot) else { return }
        for dependent in waiting {
            let index = Int(dependent)
            let origin = lanes[Int(records[index].lane)].origin
            if records[index].placement == .doomed { originLanes[Int(origin)].doomed.remove(dependent) }
            records[index].placement = .none
            place(dependent)
            lanesToWake.insert(origin)
        }
    }

    mutating func advanceOldestUnfinishedHint() {
        while oldestUnfinishedHint < records.count {
            if let status = records[oldestUnfinishedHint].status, !status.isFinished { return }
            oldestUnfinishedHint += 1
        }
    }

    /// Drops tombstones and rebuilds every derived structure; record order (creation order),
    /// sequences and lane numbers are kept, so lanes and cursors behave as before (a ready
    /// lane's turn is handed out again, in lane order).
    mutating func compact() {
        records.removeAll { $0.status == nil }
        tombstones = 0
        let slots = (0..<Int32(records.count))
        ids.rebuild(capacityFor: records.count, slots: slots, hashOf: { [records] in Self.hash(records[Int($0)].id) })
        keys.rebuild(capacityFor: records.count, slots: slots, hashOf: { [records, lanes] in Self.keyHash(ofSlot: $0, records, lanes) })
        rebuildLanes()
    }

    /// Rebuilds counts, lane heaps, schedules and dependencies from the records' statuses
    /// alone, in creation order (tombstones are skipped).
    mutating func rebuildLanes() {
        // Refilled in place: the storage keeps its reservation (see `reserveRecords`).
        heapPositions.removeAll(keepingCapacity: true)
        heapPositions.append(contentsOf: repeatElement(-1, count: records.count))
        dependents = [:]
        statusCounts = [Int](repeating: 0, count: OperationStatus.allCases.count)
        for origin in originLanes.indices { originLanes[origin] = OriginLanes(defaultLane: originLanes[origin].defaultLane) }
        for lane in lanes.indices {
            lanes[lane].heaps = PriorityHeaps()
            lanes[lane].inFlight = 0
            lanes[lane].schedule = .none
            lanes[lane].unfinished = 0
            lanes[lane].marked = 0
            lanePositions[lane] = -1
        }
        let slots = (0..<Int32(records.count))
        for slot in slots {
            let index = Int(slot)
            records[index].placement = .none
            if let status = records[index].status {
                let lane = Int(records[index].lane)
                statusCounts[status.index] += 1
                originLanes[Int(lanes[lane].origin)].counts[status.index] += 1
                if !status.isFinished { lanes[lane].unfinished += 1 }
                if records[index].mark != .none { lanes[lane].marked += 1 }
            }
        }
        for slot in slots where records[Int(slot)].status != nil { place(slot) }
        completions.rebuild(slots.filter { records[Int($0)].status == .completed }.map { ($0, records[Int($0)].completedAt) })
        oldestUnfinishedHint = 0
        advanceOldestUnfinishedHint()
        lanesToWake.formUnion(0..<UInt32(origins.count))
    }
}

import Foundation
import OutboxModel

/// Taking operations for delivery, and the marks that number their attempts.
///
/// An attempt's number (`Outbox-Attempt`) must be higher than that of every attempt sent
/// before it, also after a `kill -9`; so before an attempt is sent, a record counting it must be
/// on disk (an `updated` record in `inProgress`, its *mark*: recovery reads it as an attempt
/// made). A sync before every send would halve a lane's rate, so a lane's next operations are
/// marked ahead (`reserveAhead`), written behind its outcomes, and by the time the lane reaches
/// one its mark is on disk. The cost: after a crash (or a stop), operations marked but never
/// sent count one attempt more than they made.
extension QueueIndex {
    /// How far ahead a lane's operations are marked: it marks again once fewer than half are left.
    public static var marksAhead: Int { 32 }

    /// An operation taken for delivery: in flight now, numbered.
    public struct Take: Sendable {
        /// The operation as it was before (pending).
        public var entry: Entry
        /// Its state in flight (its `attempts` is the attempt's number).
        public var inProgress: OperationState
        /// Where the mark counting this attempt stands.
        public var mark: MarkNeed
    }

    /// Where the mark of a taken attempt stands.
    public enum MarkNeed: Sendable, Equatable {
        /// On disk: the attempt may be sent.
        case written
        /// Appended ahead and not on disk yet: wait for it.
        case writing
        /// Not written: the caller writes it now and waits for it.
        case missing
    }

    /// Takes `id` for delivery at `now` (the head `nextReady` just named): `inProgress` at once,
    /// its lane busy, numbered by its mark if one was made ahead, else one past its attempts;
    /// its lane keeps `cancellation` until the attempt ends (see `beginRemoval`). Nil when it
    /// is not pending or a removal of it is under way.
    public mutating func take(_ id: UUID, now: Int64, cancellation: CallCancellation? = nil) -> Take? {
        guard let slot = slot(of: id), records[Int(slot)].status == .pending, !records[Int(slot)].removing else { return nil }
        let entry = entry(at: slot)
        let mark = records[Int(slot)].mark
        let number = mark == .none ? entry.attempts + 1 : entry.attempts
        let inProgress = ReplayTransition.startAttempt(current: entry.state, now: now, number: number)
        // `setStatus` drops the mark from the lane's count.
        apply(IndexedState(inProgress), to: slot)
        lanes[Int(records[Int(slot)].lane)].attempt = cancellation
        let need: MarkNeed = switch mark {
        case .none: .missing
        case .writing: .writing
        case .written: .written
        }
        return Take(entry: entry, inProgress: inProgress, mark: need)
    }

    /// An operation marked ahead: what its mark record is made of.
    public struct Marked: Sendable {
        public var id: UUID
        /// Its state as the index has it, `attempts` the marked attempt's number.
        public var state: OperationState
        /// The index holds its `lastError` cut short (`maxErrorLength`): the whole one is in its
        /// latest record.
        public var errorCut: Bool
    }

    /// Marks the next attempt of the operations `id`'s lane delivers next, when fewer than half
    /// of `marksAhead` are marked: up to `marksAhead` of them, in the order the lane delivers
    /// them, leaving out those backing off and those `skip` names. Each one's attempt count goes
    /// up by one now (the mark's number) and it is `writing` until `markWritten`. Returns them:
    /// the caller writes their marks, in this order.
    public mutating func reserveAhead(after id: UUID, skip: (UUID) -> Bool = { _ in false }) -> [Marked] {
        guard let taken = slot(of: id) else { return [] }
        let lane = Int(records[Int(taken)].lane)
        let room = Self.marksAhead - Int(lanes[lane].marked)
        guard room > Self.marksAhead / 2 else { return [] }
        var chosen: [Int32] = []
        // Already marked ones come first in the lane's order: look past them, but not forever.
        var budget = Self.marksAhead + room
        func consider(_ slot: Int32) -> Bool {
            budget -= 1
            // Read in place: a copy of the record would retain its key and extras.
            let index = Int(slot)
            if records[index].mark == .none, records[index].nextAttemptAt == Self.none, !skip(records[index].id) {
                chosen.append(slot)
            }
            return chosen.count < room && budget > 0
        }
        let heaps = lanes[lane].heaps
        var going = heaps.started.visitInOrder { consider($0.record) }
        for priority in OperationPriority.allCases.reversed() where going {
            going = heaps.heap(of: priority).visitInOrder { consider($0) }
        }
        for slot in chosen {
            records[Int(slot)].attempts += 1
            records[Int(slot)].mark = .writing
        }
        lanes[lane].marked += Int32(chosen.count)
        return chosen.map { slot in
            let record = records[Int(slot)]
            let state = OperationState(status: .pending, retryCount: Int(record.retryCount),
                                       lastAttemptAt: record.lastAttemptAt == Self.none ? nil : record.lastAttemptAt,
                                       lastError: record.lastError, attempts: Int(record.attempts))
            return Marked(id: record.id, state: state, errorCut: (record.lastError?.count ?? 0) >= Self.maxErrorLength)
        }
    }

    /// The mark of `id`'s attempt `number` reached the disk (`written`), or failed to: a mark
    /// ahead that is still waiting is then usable, or dropped (its attempt is numbered one
    /// higher than needed, which is harmless).
    public mutating func markWritten(_ id: UUID, number: Int, written: Bool) {
        guard let slot = slot(of: id), records[Int(slot)].mark == .writing, Int(records[Int(slot)].attempts) == number else { return }
        if written {
            records[Int(slot)].mark = .written
        } else {
            records[Int(slot)].mark = .none
            lanes[Int(records[Int(slot)].lane)].marked -= 1
        }
    }

    /// Gives back every mark ahead (a clean stop): each operation's attempt count drops by the
    /// attempt it marked and never made. Returns them, to be written as they now are.
    public mutating func releaseMarks() -> [Entry] {
        var released: [Entry] = []
        for slot in records.indices where records[slot].mark != .none && records[slot].status == .pending {
            records[slot].mark = .none
            records[slot].attempts -= 1
            lanes[Int(records[slot].lane)].marked -= 1
            released.append(entry(at: Int32(slot)))
        }
        return released
    }

    /// Puts `id`, taken in `taken` and never sent, back as it was (pending, its attempt count
    /// without the attempt it would have made); false when it is no longer in progress.
    @discardableResult
    public mutating func release(_ id: UUID, taken: OperationState, number: Int) -> Bool {
        guard let slot = slot(of: id), records[Int(slot)].status == .inProgress else { return false }
        var state = taken
        state.attempts = number - 1
        records[Int(slot)].take(IndexedState(state))
        setStatus(.pending, of: slot)
        replaceDependents(of: slot)
        return true
    }
}

extension QueueIndex.PriorityHeaps {
    /// The heap of `priority`.
    func heap(of priority: OperationPriority) -> LaneHeap {
        switch priority {
        case .low: low
        case .normal: normal
        case .high: high
        case .critical: critical
        }
    }
}

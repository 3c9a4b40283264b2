import Foundation
import OutboxModel

/// Removing operations as one step with respect to their lanes: a removal starts by taking
/// the operation out of its lane under the same lock the lane's next pick takes
/// (`beginRemoval`), so from then on nothing takes it, while its `deleted` record is written;
/// then it goes (`remove`), or, when that write failed, comes back (`abortRemoval`). An
/// operation in flight when its removal begins keeps its lane busy until it is gone; the
/// caller cancels its attempt.
extension QueueIndex {
    /// Starts removing `id` when `include` accepts it as it is now: out of its lane, never taken
    /// again unless the removal is aborted. Returns it as it was, and the cancellation of its
    /// attempt when it is in flight (the caller cancels it); nil when it is unknown, not
    /// accepted, or already being removed.
    public mutating func beginRemoval(_ id: UUID, where include: (Entry) -> Bool = { _ in true })
        -> (entry: Entry, inFlight: CallCancellation?)? {
        guard let slot = slot(of: id), !records[Int(slot)].removing else { return nil }
        let entry = entry(at: slot)
        guard include(entry) else { return nil }
        records[Int(slot)].removing = true
        let lane = Int(records[Int(slot)].lane)
        guard records[Int(slot)].placement == .inFlight else {
            // `place` keeps a removing operation out of every lane structure.
            unplace(slot)
            place(slot)
            return (entry, nil)
        }
        defer { lanes[lane].attempt = nil }
        return (entry, lanes[lane].attempt)
    }

    /// `id` stays after all (its `deleted` record could not be written): back in its lane at
    /// its creation-order place. One that was in flight is pending again: its attempt was
    /// cancelled with the removal.
    public mutating func abortRemoval(_ id: UUID) {
        guard let slot = slot(of: id), records[Int(slot)].removing else { return }
        records[Int(slot)].removing = false
        if records[Int(slot)].status == .inProgress {
            setStatus(.pending, of: slot)
        } else {
            unplace(slot)
            place(slot)
        }
        lanesToWake.insert(lanes[Int(records[Int(slot)].lane)].origin)
    }

    /// Whether a removal of `id` is under way.
    public func isBeingRemoved(_ id: UUID) -> Bool {
        slot(of: id).map { records[Int($0)].removing } ?? false
    }
}

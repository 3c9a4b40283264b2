import Foundation
import OutboxModel

/// What the replayer needs from the queue: the next operation of an origin (the head of the
/// lane whose turn it is), and durable state changes. The queue decides order (lanes and their
/// turns, priority, FIFO, dependencies); the replayer only acts and bounds how many run at once.
package protocol ReplaySource: Sendable {
    /// The next thing to do for `origin`, leaving out lanes with an attempt in flight: the
    /// caller marks an operation `inProgress` (`recordSoon`) before asking again.
    func nextWork(for origin: Origin, now: Int64) -> ReplayWork
    /// Writes the new state durably (returns after its fdatasync).
    func record(_ id: UUID, _ state: OperationState) async
    /// Applies the new state now and writes it behind the caller's back: the lane goes on
    /// while the group commit persists it. A crash before that write is durable replays the
    /// operation once more with the same idempotency key — at-least-once delivery for
    /// operations in flight. `written` runs once the record is on disk, or once writing it
    /// failed (logged here): either way the caller stops waiting for it.
    func recordSoon(_ id: UUID, _ state: OperationState, written: @escaping @Sendable () -> Void)
    /// `recordSoon` for the replayer's own step on a lane of `origin`: the replayer asks for
    /// that origin's next work itself, so the queue wakes only other origins' lanes (one whose
    /// dependency this step resolved), never `origin`'s, which saves a task and a hop per step.
    /// The write may wait (a few milliseconds at most) to share a sync with later ones, until
    /// ``hurryWrites()``: the lane's window bounds what that leaves unwritten.
    func recordSoon(_ id: UUID, _ state: OperationState, replaying origin: Origin, written: @escaping @Sendable () -> Void)
    /// Starts writing the replayer's waiting outcomes now: a lane's window filled up to the
    /// point where it would soon have to wait for them.
    func hurryWrites()
    /// Applies the `inProgress` state of an attempt the replayer starts on a lane of `origin`
    /// to the queue only, never to the log: recovery turns `inProgress` back into `pending`,
    /// so that record would change nothing a restart finds, and the attempt's outcome is
    /// written anyway. Like the replaying `recordSoon`, it wakes no lane of `origin`.
    func markInFlight(_ id: UUID, _ state: OperationState, replaying origin: Origin)
    /// Whether one more attempt of `origin` could start at `now`: some lane's head is ready
    /// or due, or an operation waits to be failed behind its dependency.
    func hasWork(for origin: Origin, now: Int64) -> Bool
    /// Called while `id`'s attempt is in flight: the source may read ahead what `id`'s lane
    /// delivers next, so that `nextWork` answers from memory. Never changes what `nextWork`
    /// answers, only how fast.
    func readAhead(after id: UUID)
    /// Origins with operations that are not finished.
    var originsWithWork: [Origin] { get }
    var forcedOffline: Bool { get }
}

extension ReplaySource {
    /// `recordSoon` for a state whose write nobody waits for.
    package func recordSoon(_ id: UUID, _ state: OperationState) {
        recordSoon(id, state, written: {})
    }

    /// A source that wakes no lanes from `recordSoon` needs no distinction.
    package func recordSoon(_ id: UUID, _ state: OperationState, replaying origin: Origin,
                            written: @escaping @Sendable () -> Void) {
        recordSoon(id, state, written: written)
    }

    /// A source without a memory-only state records it like any other.
    package func markInFlight(_ id: UUID, _ state: OperationState, replaying origin: Origin) {
        recordSoon(id, state, replaying: origin, written: {})
    }

    /// A source that writes everything at once has nothing to hurry.
    package func hurryWrites() {}

    /// A source that reads nothing ahead.
    package func readAhead(after id: UUID) {}

    /// A source that cannot tell says yes: the replayer then looks with `nextWork`.
    package func hasWork(for origin: Origin, now: Int64) -> Bool { true }
}

/// The next thing an origin's replay should do.
package enum ReplayWork: Sendable {
    /// Attempt this operation now.
    case attempt(UUID, OperationRequest, OperationState)
    /// This operation's dependency ended failed or conflict: it fails too.
    case failDependent(UUID, OperationState)
    /// Nothing is due before this time (ms since the epoch).
    case wait(until: Int64)
    /// Nothing to start: every lane is empty, waiting for a dependency, or in flight.
    case idle
}

import Foundation
import OutboxModel
import Synchronization

/// What the replayer needs from the queue: the next operation of an origin (the head of the
/// lane whose turn it is), and durable state changes. The queue decides order (lanes and their
/// turns, priority, FIFO, dependencies); the replayer only acts and bounds how many run at once.
package protocol ReplaySource: Sendable {
    /// Takes the next thing to do for `origin`, leaving out lanes with an attempt in flight.
    /// An `.attempt` is taken in the same step as it is chosen: the operation is `inProgress`
    /// (its lane busy) before anyone can ask again or remove it unseen, so a removal that comes
    /// later finds it in flight and cancels it through the attempt's `cancellation`.
    func takeWork(for origin: Origin, now: Int64) -> ReplayWork
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
    /// Gives back an attempt that was taken but never sent (the replayer is stopping): the
    /// operation is pending again as it was, and so is its attempt count, so its next attempt
    /// carries the number this one would have.
    func release(_ attempt: ReplayAttempt)
    /// Whether one more attempt of `origin` could start at `now`: some lane's head is ready
    /// or due, or an operation waits to be failed behind its dependency.
    func hasWork(for origin: Origin, now: Int64) -> Bool
    /// Called while `id`'s attempt is in flight: the source may read ahead what `id`'s lane
    /// delivers next, so that `takeWork` answers from memory. Never changes what `takeWork`
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

    /// A source without durable attempt marks puts the state it was taken in back.
    package func release(_ attempt: ReplayAttempt) {
        recordSoon(attempt.id, attempt.taken, replaying: attempt.request.origin, written: {})
    }

    /// A source that writes everything at once has nothing to hurry.
    package func hurryWrites() {}

    /// A source that reads nothing ahead.
    package func readAhead(after id: UUID) {}

    /// A source that cannot tell says yes: the replayer then looks with `takeWork`.
    package func hasWork(for origin: Origin, now: Int64) -> Bool { true }
}

/// An operation taken for delivery: in flight in the queue, with the number its attempt carries.
package struct ReplayAttempt: Sendable {
    package var id: UUID
    package var request: OperationRequest
    /// Its state while in flight: `inProgress`, `lastAttemptAt` the take, `attempts` the number
    /// of this attempt (`Outbox-Attempt`). The outcome is computed from it.
    package var inProgress: OperationState
    /// `lastAttemptAt` before this attempt: with `inProgress`, what ``taken`` is made of (one
    /// state fewer to copy along with every attempt).
    private var previousAttemptAt: Int64?
    /// Ends the attempt early: its deadline, a removal of the operation, a stop.
    package var cancellation: CallCancellation
    /// Nil when the record saying this attempt may start is on disk already; else the replayer
    /// waits on it before sending (a crash after the send must find the attempt counted).
    package var mark: AttemptMark?

    /// This attempt's number, sent as `Outbox-Attempt`.
    package var number: Int { inProgress.attempts }

    /// The state it was taken in as it is given back (``ReplaySource/release(_:)``): pending,
    /// due, its attempt count without this attempt.
    package var taken: OperationState {
        var state = inProgress
        state.status = .pending
        state.lastAttemptAt = previousAttemptAt
        state.attempts = number - 1
        return state
    }

    package init(id: UUID, request: OperationRequest, taken: OperationState, inProgress: OperationState,
                 cancellation: CallCancellation = CallCancellation(), mark: AttemptMark? = nil) {
        self.id = id
        self.request = request
        previousAttemptAt = taken.lastAttemptAt
        self.inProgress = inProgress
        self.cancellation = cancellation
        self.mark = mark
    }

    /// `request` in `state`, taken at `now` by a source that keeps no marks: numbered one past
    /// the attempts its state counts.
    package init(taking request: OperationRequest, in state: OperationState, now: Int64) {
        self.init(id: request.id, request: request, taken: state,
                  inProgress: ReplayTransition.startAttempt(current: state, now: now, number: state.attempts + 1))
    }
}

/// The durability of one attempt mark (the record that says an attempt may start): signalled
/// once that record is on disk, or once writing it failed, or once its operation was removed.
package final class AttemptMark: Sendable {
    private struct State {
        var outcome: Bool?
        var waiters: [CheckedContinuation<Bool, Never>] = []
    }

    private let state = Mutex(State())

    package init() {}

    /// Settles the mark: true when it is on disk. Only the first settle counts.
    package func settle(written: Bool) {
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            guard state.outcome == nil else { return [] }
            state.outcome = written
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: written) }
    }

    /// Returns once settled: whether the mark is on disk.
    package func written(isolation: isolated (any Actor)? = #isolation) async -> Bool {
        if let outcome = state.withLock({ $0.outcome }) { return outcome }
        return await withCheckedContinuation(isolation: isolation) { (continuation: CheckedContinuation<Bool, Never>) in
            let outcome = state.withLock { state -> Bool? in
                if state.outcome == nil { state.waiters.append(continuation) }
                return state.outcome
            }
            if let outcome { continuation.resume(returning: outcome) }
        }
    }
}

/// The next thing an origin's replay should do.
package enum ReplayWork: Sendable {
    /// Send this attempt now (the operation is in flight already).
    case attempt(ReplayAttempt)
    /// This operation's dependency ended failed or conflict: it fails too.
    case failDependent(UUID, OperationState)
    /// Nothing is due before this time (ms since the epoch).
    case wait(until: Int64)
    /// Nothing to start: every lane is empty, waiting for a dependency, or in flight.
    case idle
}

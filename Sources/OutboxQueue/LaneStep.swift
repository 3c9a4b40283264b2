import Foundation

/// What one origin's replay should do next, its busy lanes aside, by the queue's ordering
/// rules, from `QueueIndex.nextReady(origin:now:)`.
public struct LaneStep: Sendable, Equatable {
    /// The lane's next move.
    public enum Next: Sendable, Equatable {
        /// Send this operation now: the head of the lane whose turn it is.
        case deliver(UUID)
        /// Every lane that could go has its head backing off: nothing before this time (ms
        /// since the epoch).
        case wait(until: Int64)
        /// Nothing may go now, and some lane has an operation in flight (a lane delivers one at
        /// a time); its end may free the next.
        case busy
        /// Nothing to deliver: no pending operation, or every one waits for its dependency.
        case idle
    }

    /// The lane's next move.
    public var next: Next
    /// Pending operations of the origin whose dependency ended `failed` or `conflict`, oldest
    /// first: the caller fails them (`ReplayTransition.failDependency`) and updates the index.
    public var dependencyFailed: [UUID]

    /// A step with the given move and operations to fail.
    public init(next: Next, dependencyFailed: [UUID] = []) {
        self.next = next
        self.dependencyFailed = dependencyFailed
    }
}

import Foundation

/// What one origin's replay lane should do now, by the queue's ordering rules, from
/// `QueueIndex.nextReady(origin:now:)`.
public struct LaneStep: Sendable, Equatable {
    /// The lane's next move.
    public enum Next: Sendable, Equatable {
        /// Send this operation now.
        case deliver(UUID)
        /// The head of the lane is backing off: nothing before this time (ms since the epoch).
        case wait(until: Int64)
        /// An operation of this lane is in flight: the lane delivers one at a time.
        case busy
        /// Nothing to deliver: no pending operation, or every one waits for its dependency.
        case idle
    }

    /// The lane's next move.
    public var next: Next
    /// Pending operations of this lane whose dependency ended `failed` or `conflict`, oldest
    /// first: the caller fails them (`ReplayTransition.failDependency`) and updates the index.
    public var dependencyFailed: [UUID]

    /// A step with the given move and operations to fail.
    public init(next: Next, dependencyFailed: [UUID] = []) {
        self.next = next
        self.dependencyFailed = dependencyFailed
    }
}

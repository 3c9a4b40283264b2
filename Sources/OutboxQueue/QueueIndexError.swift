import Foundation

/// Why the queue index refused a change.
public enum QueueIndexError: Error, Sendable, Equatable {
    /// An operation with this id is already indexed.
    case duplicateID(UUID)
    /// An operation with this idempotency key is already indexed.
    case duplicateKey(String)
    /// No operation with this id is indexed.
    case unknownID(UUID)
    /// Restored without an origin of its own, and no operation restored before it had one.
    case unknownOrigin(UUID)
}

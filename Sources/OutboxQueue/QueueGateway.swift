import Foundation
import OutboxModel

/// What the proxy path needs from the durable queue, and no more: the seam between the event
/// loops (synchronous reads on every queueable request) and the queue's storage and replay.
///
/// Reads are synchronous (a lock and an index lookup); `enqueue` completes after the group
/// commit's fdatasync, on a storage thread.
package protocol QueueGateway: AnyObject, Sendable {
    /// Admin `PUT /admin/connectivity offline`: forward nothing, queue every queueable request.
    var forcedOffline: Bool { get }
    /// Operations not yet finished in the lane of `origin` and `orderingKey` (nil: the default
    /// lane): new writes to that lane queue behind them, never overtake them.
    func hasQueued(_ origin: Origin, orderingKey: String?) -> Bool
    /// The stored operation of `origin` carrying `idempotencyKey`, if any, with the response it
    /// completed with (read from disk) and the digest of the credentials it was made with. Keys
    /// are scoped to an origin: the same key sent to another origin is another operation.
    /// Throws when the key is indexed but its records cannot be read: the caller can then tell
    /// neither a repeat from a conflict nor a free key, and must answer an error rather than
    /// store or forward the request again.
    func operation(withKey idempotencyKey: String, origin: Origin) throws(QueueReadError) -> OperationSnapshot?
    /// An id, or an idempotency key of `origin`, from `Outbox-Depends-On`, resolved to an
    /// operation id.
    func resolveDependency(_ reference: String, origin: Origin) -> UUID?
    /// Stores the operation durably; `completion` runs after its record is on stable storage,
    /// with the operation that holds the request's key (this one, or one stored before it).
    /// `freshKey`: the random UUID the proxy made up as this request's key (its lowercase text
    /// is `request.idempotencyKey`), so no other request can hold it: it is neither reserved
    /// nor looked up, and the index takes the UUID as it is instead of parsing its text.
    func enqueue(_ request: OperationRequest, freshKey: UUID?,
                 completion: @escaping @Sendable (Result<OperationSnapshot, EnqueueError>) -> Void)
    /// Queueing was decided because `origin` is unreachable: remember it for the replayer.
    /// Returns whether the origin was reachable until now.
    @discardableResult
    func originUnreachable(_ origin: Origin, reason: String) -> Bool
    /// A forwarded request got an answer from `origin`.
    func originAnswered(_ origin: Origin)
    /// Whether `origin` is currently believed reachable.
    func isOnline(_ origin: Origin) -> Bool
}

/// Why a request could not be stored.
package enum EnqueueError: Error, Sendable, Equatable {
    /// `queue.maxOperations` reached, or the disk is full: 507.
    case full(String)
    /// The key is taken by a different request (a race with another client): 422.
    case keyConflict
    /// Storage failed otherwise (writing the operation, indexing it, or reading back the one
    /// its key names): 507 as well, the proxy keeps serving.
    case storage(String)
}

/// The queue holds an operation but cannot read its records back from disk, so it cannot say
/// what the operation is. Never the same as "no such operation".
package struct QueueReadError: Error, Sendable, Equatable, CustomStringConvertible {
    package var id: UUID
    /// The storage failure, as text (the storage layer's error type stays below the queue).
    package var reason: String

    package var description: String { "stored operation \(id.lowercasedText) cannot be read: \(reason)" }
}

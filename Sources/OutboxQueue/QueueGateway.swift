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
    /// Whether `operation(withKey:origin:)`, `hasQueued` and `resolveDependency` answer at once
    /// from memory. A store whose answers wait on a database says false: the proxy then asks
    /// `lookUp`, which answers later on a thread of the store's, and no event loop waits.
    var readsAtOnce: Bool { get }
    /// Everything the proxy's rules need to know about a queueable request, in one question:
    /// the operation holding its key, whether its lane holds unfinished work, what its
    /// `Outbox-Depends-On` names. `completion` runs once, on any thread.
    func lookUp(_ question: QueueQuestion, completion: @escaping @Sendable (QueueFacts) -> Void)
}

extension QueueGateway {
    /// A store that reads from memory answers the three questions one by one, at once.
    package func lookUp(_ question: QueueQuestion, completion: @escaping @Sendable (QueueFacts) -> Void) {
        completion(facts(for: question))
    }

    /// The answers of the synchronous reads, as `lookUp` gives them.
    package func facts(for question: QueueQuestion) -> QueueFacts {
        let existing: Result<OperationSnapshot?, QueueReadError>
        if let key = question.key {
            existing = Result { () throws(QueueReadError) in try operation(withKey: key, origin: question.origin) }
        } else {
            existing = .success(nil)
        }
        let laneHasQueued = question.laneMatters && hasQueued(question.origin, orderingKey: question.orderingKey)
        let dependency = question.dependsOn.map { resolveDependency($0, origin: question.origin) }
        return QueueFacts(existing: existing, laneHasQueued: laneHasQueued, dependency: dependency)
    }

    package var readsAtOnce: Bool { true }
}

/// What the proxy asks the queue about one queueable request (see `QueueGateway.lookUp`).
package struct QueueQuestion: Sendable {
    package var origin: Origin
    /// The client's idempotency key; nil when the proxy made one up (no operation can hold it).
    package var key: String?
    /// The request's lane.
    package var orderingKey: String?
    /// Whether the lane's unfinished work matters: only to a request that could be forwarded.
    package var laneMatters: Bool
    /// `Outbox-Depends-On`, as the client sent it.
    package var dependsOn: String?

    package init(origin: Origin, key: String?, orderingKey: String?, laneMatters: Bool, dependsOn: String?) {
        self.origin = origin
        self.key = key
        self.orderingKey = orderingKey
        self.laneMatters = laneMatters
        self.dependsOn = dependsOn
    }
}

/// The queue's answers to a `QueueQuestion`.
package struct QueueFacts: Sendable {
    /// The operation holding the key (nil: none), or why it cannot be read.
    package var existing: Result<OperationSnapshot?, QueueReadError>
    /// The lane holds unfinished operations (false when it did not matter).
    package var laneHasQueued: Bool
    /// Nil when no dependency was asked for; `.some(nil)` when it names no operation.
    package var dependency: UUID??
    /// Set when the store could not be asked (its database is unreachable): the request is
    /// answered `503` `store_unavailable`, never forwarded or stored blind.
    package var unavailable: String?

    package init(existing: Result<OperationSnapshot?, QueueReadError>, laneHasQueued: Bool, dependency: UUID??,
                 unavailable: String? = nil) {
        self.existing = existing
        self.laneHasQueued = laneHasQueued
        self.dependency = dependency
        self.unavailable = unavailable
    }

    /// The answer when the store cannot be reached.
    package static func unavailable(_ reason: String) -> QueueFacts {
        QueueFacts(existing: .success(nil), laneHasQueued: false, dependency: nil, unavailable: reason)
    }
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
    /// The store cannot be reached (the database is down or refuses): 503 `store_unavailable`
    /// with `Retry-After`; nothing was stored.
    case unavailable(String)
}

/// The queue holds an operation but cannot read its records back from disk, so it cannot say
/// what the operation is. Never the same as "no such operation".
package struct QueueReadError: Error, Sendable, Equatable, CustomStringConvertible {
    package var id: UUID
    /// The storage failure, as text (the storage layer's error type stays below the queue).
    package var reason: String

    package init(id: UUID, reason: String) {
        self.id = id
        self.reason = reason
    }

    package var description: String { "stored operation \(id.lowercasedText) cannot be read: \(reason)" }
}

/// A store of the queue as the service runs it: the views the proxy, the admin API and the
/// replayer use, and its life cycle. Two implement it, with the same rules (`QueueRules`):
/// `OutboxQueue`, the local log in `dataDirectory`, and the PostgreSQL store that several
/// instances share (SPEC §9).
package protocol QueueStore: QueueGateway, AdminQueueSource, ReplaySource {
    /// Which origins this instance sees online; the store tells it which hold work.
    var reachability: Reachability { get }
    /// Connects the replayer and starts the lanes that have work.
    func attach(_ replayer: any LaneWaker)
    /// The periodic sweep: retention, expiry, and whatever the store keeps tidy.
    func maintain() async
    /// Makes the operations of `origin` held for credentials (`QueueRules.isHeldForCredentials`)
    /// due now: fresh credentials came for it (SPEC §10).
    func wakeHeld(origin: Origin) async
    /// Writes what is pending and lets go of the store (SIGTERM).
    func close()
}

extension QueueStore {
    // Reachability is each instance's own whatever the store (SPEC §9): the proxy's reports go
    // to it alike.

    package func originUnreachable(_ origin: Origin, reason: String) -> Bool {
        reachability.markOffline(origin, reason: reason)
    }

    package func originAnswered(_ origin: Origin) {
        reachability.markOnline(origin)
    }

    package func isOnline(_ origin: Origin) -> Bool {
        reachability.isOnline(origin)
    }
}

extension OperationSnapshot {
    /// The snapshot naming `instance` as the one that attempted it, once it was attempted.
    package func attempted(by instance: String) -> OperationSnapshot {
        guard state.attempts > 0 else { return self }
        var named = self
        named.instance = instance
        return named
    }
}

import Foundation
import OutboxModel
import OutboxQueue

/// What the proxy does with a request while a queue runs: the offline-buffering rules as pure
/// functions of plain facts, which `ProxyExchange` gathers (header parsing, the queue's
/// synchronous reads) and then carries out.
///
/// At the head (`atHead`), a bad `Outbox-*` header is refused before anything else; a method
/// that is not queueable is forwarded while its origin is believed online and refused `503`
/// otherwise, since nothing could answer it later; a queueable request is decided only once its
/// whole body is in. Whole (`decide`), first match wins: a malformed or repeated idempotency
/// header is refused; a key the queue already holds for the request's origin answers for that
/// operation, whatever the origin's state (its stored response once completed, given only to a
/// request with the same credentials, else a `202` for it), or `422` when the request differs or
/// the credentials do; a new request is stored while the origin is offline or forced offline, while
/// its lane still holds work (so it cannot overtake an older write) or with `Outbox-Mode: queue`,
/// and is forwarded otherwise. Cases carry only values the facts already hold, so the common
/// "forward, nothing queued" decision builds nothing.
enum QueueDecision: Equatable, Sendable {
    /// Read the request body whole first: a queueable request is decided with it.
    case readBody
    /// Send the request to the origin; what happens next is the forwarding's business.
    case forward
    /// Store the request, with its resolved `Outbox-Depends-On`, and answer `202` once it is on
    /// stable storage.
    case store(dependsOn: UUID?)
    /// Answer the stored response of the completed operation `operation`, marked as a replay.
    case replay(StoredResponse, operation: UUID)
    /// Answer `202` for this operation: the one the key already names, or the one just stored.
    case accept(OperationSnapshot)
    /// Answer an error, and do nothing else.
    case reject(QueueRefusal)

    /// Whether the origin is believed reachable. Forced offline (the admin switch) is kept apart
    /// from unreachable so that a decision reads in the terms a user set up; both lead to the
    /// same outcomes.
    enum Connectivity: Equatable, Sendable {
        case online
        case offline
        case forcedOffline
    }

    /// What a request head says about the queue's part in it.
    enum Method: Equatable, Sendable {
        /// Its method is in `queue.methods`.
        case queueable
        /// Any other method, with its origin's connectivity.
        case notQueueable(Connectivity)
    }

    /// What the queue holds under the request's idempotency key (within its origin).
    enum KnownKey: Equatable, Sendable {
        /// Nothing: the request is new.
        case unknown
        /// An operation; for a completed one, its kept response when it could be read, and
        /// whether the request carries the credentials the operation was made with.
        case operation(OperationSnapshot, storedResponse: StoredResponse?, sameCredentials: Bool)
    }

    /// `Outbox-Depends-On`, resolved by the queue.
    enum Dependency: Equatable, Sendable {
        /// No such header.
        case absent
        /// The operation the header names.
        case resolved(UUID)
        /// The header's value names no operation, by id or by key.
        case unresolved(String)
    }

    /// Everything the decision for a whole queueable request depends on.
    struct Request: Equatable, Sendable {
        /// The request's idempotency header; `absent` means the proxy made up a key.
        var key: IdempotencyKeyHeader
        /// What the queue holds under the key (`unknown` when the key was refused).
        var known: KnownKey
        /// The request's fingerprint: needed, and so computed, only when the key is known (a
        /// direct forward never hashes its body).
        var fingerprint: [UInt8]
        var connectivity: Connectivity
        /// The request's lane (its origin and `Outbox-Ordering-Key`) still holds operations that
        /// are not finished. Looked up only when it can change the decision (an origin online,
        /// no `Outbox-Mode: queue`); false otherwise.
        var laneHasQueued: Bool
        /// `Outbox-Mode: queue`.
        var forceQueue: Bool
        var dependency: Dependency
    }

    /// The decision at the request head.
    static func atHead(control: Result<ControlHeaders, ControlHeaderError>, method: Method) -> QueueDecision {
        if case .failure(let error) = control { return .reject(.controlHeader(error)) }
        switch method {
        case .queueable: return .readBody
        case .notQueueable(.online): return .forward
        case .notQueueable(.offline), .notQueueable(.forcedOffline): return .reject(.originOffline)
        }
    }

    /// The decision for a queueable request whose body is in.
    static func decide(_ request: Request) -> QueueDecision {
        switch request.key {
        case .invalid: return .reject(.invalidKey)
        case .repeated: return .reject(.repeatedKey)
        case .absent, .given: break
        }
        if case .operation(let existing, let stored, let sameCredentials) = request.known {
            guard existing.fingerprint == request.fingerprint else { return .reject(.keyReused) }
            if existing.state.status == .completed, let stored {
                return sameCredentials ? .replay(stored, operation: existing.id) : .reject(.keyInUse)
            }
            return .accept(existing)
        }
        if request.connectivity != .online || request.forceQueue || request.laneHasQueued {
            return storing(request.dependency)
        }
        return .forward
    }

    /// Storing a request, decided directly or because forwarding found the origin unreachable:
    /// its dependency must name an operation.
    static func storing(_ dependency: Dependency) -> QueueDecision {
        switch dependency {
        case .absent: .store(dependsOn: nil)
        case .resolved(let id): .store(dependsOn: id)
        case .unresolved(let reference): .reject(.unknownDependency(reference))
        }
    }

    /// What the queue's answer to a store asks for.
    static func stored(_ result: Result<OperationSnapshot, EnqueueError>) -> QueueDecision {
        switch result {
        case .success(let info): .accept(info)
        // Another client stored a different request under the key meanwhile.
        case .failure(.keyConflict): .reject(.keyReused)
        case .failure(.full(let reason)), .failure(.storage(let reason)): .reject(.insufficientStorage(reason))
        case .failure(.unavailable(let reason)): .reject(.storeUnavailable(reason))
        }
    }
}

import OutboxModel
import OutboxQueue

/// Why the queue's rules refuse a request, before or instead of storing it; `error` turns it
/// into the status and one-line message the client gets. Kept apart from `ProxyError` so that a
/// decision builds no message until a request is really refused.
enum QueueRefusal: Equatable, Sendable {
    /// An `Outbox-*` control header is repeated or has a bad value: `400`.
    case controlHeader(ControlHeaderError)
    /// A method the queue does not store, to an origin believed offline: `503`.
    case originOffline
    /// The idempotency header is not 1–255 visible ASCII characters: `400`.
    case invalidKey
    /// Several idempotency headers: `400`.
    case repeatedKey
    /// The key belongs to an operation with another method, target or body: `422`.
    case keyReused
    /// The key belongs to a completed operation made with other credentials: `422`, so that
    /// one user cannot read another's stored response by repeating a key.
    case keyInUse
    /// `Outbox-Depends-On` names no operation, by id or by key: `400`.
    case unknownDependency(String)
    /// The queue is full, or its storage failed: `507`.
    case insufficientStorage(String)
    /// The queue's store cannot be reached: `503` with `Retry-After`, nothing stored.
    case storeUnavailable(String)

    /// The error answered, naming the configured idempotency header and, for a request the
    /// queue cannot take, its origin and the methods it does take.
    func error(idempotencyHeader: String, origin: Origin, queueMethods: String) -> ProxyError {
        switch self {
        case .controlHeader(let error): .badRequest(error.message)
        case .originOffline: .unavailable("upstream \(origin) is offline; only \(queueMethods) requests are queued")
        case .invalidKey: .badRequest("\(idempotencyHeader) must be 1 to 255 visible ASCII characters")
        case .repeatedKey: .badRequest("several \(idempotencyHeader) headers")
        case .keyReused: .keyReused(idempotencyHeader)
        case .keyInUse: .keyInUse(idempotencyHeader)
        case .unknownDependency(let reference):
            .badRequest("\(ControlHeaders.dependsOnName): no operation with id or key \(reference)")
        case .insufficientStorage(let reason): .insufficientStorage(reason)
        case .storeUnavailable(let reason): .storeUnavailable(reason)
        }
    }
}

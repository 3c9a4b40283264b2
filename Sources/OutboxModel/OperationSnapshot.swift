import Foundation
import OutboxHTTP

/// One operation as every reader of the queue sees it: the fields of its `OperationRequest`
/// except headers and body, and its latest `OperationState`. Recovery reads it from each
/// `created` record without touching headers or bodies; the proxy answers a repeated key with it
/// (the fingerprint says whether the repeat is the same request); the admin API lists and shows
/// it. Only the replayer needs the whole request, and reads it from disk when it sends it.
///
/// The in-memory index keeps less (no method, target or fingerprint, which stay on disk, so a
/// million operations fit in about 200 MB): it fills the rest in from the `created` record when
/// it hands out a snapshot.
public struct OperationSnapshot: Sendable, Equatable {
    public var id: UUID
    public var origin: Origin
    public var method: String
    /// Origin-form target sent upstream (`/v1/items?x=1`).
    public var target: String
    public var idempotencyKey: String
    /// SHA-256 over method, target and body (see `OperationRequest.fingerprint`).
    public var fingerprint: [UInt8]
    public var priority: OperationPriority
    public var tag: String?
    public var dependsOn: UUID?
    /// Milliseconds since the epoch.
    public var createdAt: Int64
    /// Its lane within the origin (`Outbox-Ordering-Key`); nil: the origin's default lane.
    public var orderingKey: String?
    /// The latest state. Where a reader does not need them (recovery, listings), `response` and
    /// `conflict` are left nil: their bodies stay on disk.
    public var state: OperationState

    /// A snapshot with every field given.
    public init(id: UUID, origin: Origin, method: String, target: String, idempotencyKey: String,
                fingerprint: [UInt8], priority: OperationPriority, tag: String?, dependsOn: UUID?,
                createdAt: Int64, orderingKey: String? = nil, state: OperationState) {
        self.id = id
        self.origin = origin
        self.method = method
        self.target = target
        self.idempotencyKey = idempotencyKey
        self.fingerprint = fingerprint
        self.priority = priority
        self.tag = tag
        self.dependsOn = dependsOn
        self.createdAt = createdAt
        self.orderingKey = orderingKey
        self.state = state
    }

    /// The snapshot of `request` in `state`.
    public init(_ request: OperationRequest, state: OperationState) {
        self.init(id: request.id, origin: request.origin, method: request.method, target: request.target,
                  idempotencyKey: request.idempotencyKey, fingerprint: request.fingerprint,
                  priority: request.priority, tag: request.tag, dependsOn: request.dependsOn,
                  createdAt: request.createdAt, orderingKey: request.orderingKey, state: state)
    }
}

extension OperationRequest {
    /// The request the snapshot describes, with the headers and body its record holds.
    public init(_ snapshot: OperationSnapshot, headers: HTTPHeaders, body: [UInt8]) {
        self.init(id: snapshot.id, origin: snapshot.origin, method: snapshot.method, target: snapshot.target,
                  headers: headers, body: body, idempotencyKey: snapshot.idempotencyKey,
                  fingerprint: snapshot.fingerprint, priority: snapshot.priority, tag: snapshot.tag,
                  dependsOn: snapshot.dependsOn, createdAt: snapshot.createdAt, orderingKey: snapshot.orderingKey)
    }
}

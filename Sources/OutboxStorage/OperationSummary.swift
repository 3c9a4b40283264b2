import Foundation
import OutboxModel

/// The request fields of an operation that an in-memory index needs, without headers and body:
/// small enough to keep a million of them (origins are shared between summaries).
public struct OperationSummary: Sendable, Equatable {
    public var id: UUID
    public var origin: Origin
    public var method: String
    public var target: String
    public var idempotencyKey: String
    /// SHA-256 over method, target and body (see `OperationRequest.fingerprint`).
    public var fingerprint: [UInt8]
    public var priority: OperationPriority
    public var tag: String?
    public var dependsOn: UUID?
    /// Milliseconds since the epoch.
    public var createdAt: Int64
    /// Bytes of the stored request body.
    public var bodyLength: UInt32

    /// A summary with every field given.
    public init(id: UUID, origin: Origin, method: String, target: String, idempotencyKey: String,
                fingerprint: [UInt8], priority: OperationPriority, tag: String?, dependsOn: UUID?,
                createdAt: Int64, bodyLength: UInt32) {
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
        self.bodyLength = bodyLength
    }

    /// The summary of a full request.
    public init(_ request: OperationRequest) {
        self.init(id: request.id, origin: request.origin, method: request.method, target: request.target,
                  idempotencyKey: request.idempotencyKey, fingerprint: request.fingerprint,
                  priority: request.priority, tag: request.tag, dependsOn: request.dependsOn,
                  createdAt: request.createdAt, bodyLength: UInt32(clamping: request.body.count))
    }
}

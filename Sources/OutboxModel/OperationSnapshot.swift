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
///
/// A value with its fields in one shared box, copied on write: a durable `202` passed its
/// snapshot along six times (queue, writer thread, event loop, answer), and as a plain struct of
/// a dozen strings, arrays and optionals every pass retained and released each of them, about
/// 4k instructions a request; now a pass is one reference count.
public struct OperationSnapshot: Sendable, Equatable {
    public var id: UUID {
        get { fields.values.id }
        set { unique().values.id = newValue }
    }
    public var origin: Origin {
        get { fields.values.origin }
        set { unique().values.origin = newValue }
    }
    public var method: String {
        get { fields.values.method }
        set { unique().values.method = newValue }
    }
    /// Origin-form target sent upstream (`/v1/items?x=1`).
    public var target: String {
        get { fields.values.target }
        set { unique().values.target = newValue }
    }
    public var idempotencyKey: String {
        get { fields.values.idempotencyKey }
        set { unique().values.idempotencyKey = newValue }
    }
    /// SHA-256 over method, target and body (see `OperationRequest.fingerprint`).
    public var fingerprint: [UInt8] {
        get { fields.values.fingerprint }
        set { unique().values.fingerprint = newValue }
    }
    public var priority: OperationPriority {
        get { fields.values.priority }
        set { unique().values.priority = newValue }
    }
    public var tag: String? {
        get { fields.values.tag }
        set { unique().values.tag = newValue }
    }
    public var dependsOn: UUID? {
        get { fields.values.dependsOn }
        set { unique().values.dependsOn = newValue }
    }
    /// Milliseconds since the epoch.
    public var createdAt: Int64 {
        get { fields.values.createdAt }
        set { unique().values.createdAt = newValue }
    }
    /// Its lane within the origin (`Outbox-Ordering-Key`); nil: the origin's default lane.
    public var orderingKey: String? {
        get { fields.values.orderingKey }
        set { unique().values.orderingKey = newValue }
    }
    /// The digest of the credentials it was made with (see `OperationRequest.credentials`):
    /// filled in where a repeated key is answered, empty elsewhere.
    public var credentials: [UInt8] {
        get { fields.values.credentials }
        set { unique().values.credentials = newValue }
    }
    /// The instance that made its last attempt (SPEC §9); nil before any, or where the store
    /// does not say.
    public var instance: String? {
        get { fields.values.instance }
        set { unique().values.instance = newValue }
    }
    /// The latest state. Where a reader does not need them (recovery, listings), `response` and
    /// `conflict` are left nil: their bodies stay on disk.
    public var state: OperationState {
        get { fields.values.state }
        set { unique().values.state = newValue }
    }

    private var fields: Fields

    /// A snapshot with every field given.
    public init(id: UUID, origin: Origin, method: String, target: String, idempotencyKey: String,
                fingerprint: [UInt8], priority: OperationPriority, tag: String?, dependsOn: UUID?,
                createdAt: Int64, orderingKey: String? = nil, credentials: [UInt8] = [], state: OperationState) {
        fields = Fields(Values(id: id, origin: origin, method: method, target: target, idempotencyKey: idempotencyKey,
                               fingerprint: fingerprint, priority: priority, tag: tag, dependsOn: dependsOn,
                               createdAt: createdAt, orderingKey: orderingKey, credentials: credentials, state: state,
                               instance: nil))
    }

    /// The snapshot of `request` in `state`.
    public init(_ request: OperationRequest, state: OperationState) {
        self.init(id: request.id, origin: request.origin, method: request.method, target: request.target,
                  idempotencyKey: request.idempotencyKey, fingerprint: request.fingerprint,
                  priority: request.priority, tag: request.tag, dependsOn: request.dependsOn,
                  createdAt: request.createdAt, orderingKey: request.orderingKey, credentials: request.credentials,
                  state: state)
    }

    public static func == (lhs: OperationSnapshot, rhs: OperationSnapshot) -> Bool {
        lhs.fields === rhs.fields || lhs.fields.values == rhs.fields.values
    }

    /// The box, made this value's own first if another value shares it.
    private mutating func unique() -> Fields {
        if !isKnownUniquelyReferenced(&fields) { fields = Fields(fields.values) }
        return fields
    }

    /// The fields' box. Mutated only through `unique()`, that is only while one value holds it,
    /// so no thread ever sees it change: that is what makes the unchecked `Sendable` sound.
    private final class Fields: @unchecked Sendable {
        var values: Values

        init(_ values: Values) {
            self.values = values
        }
    }

    /// The fields themselves, compared as the snapshot is.
    private struct Values: Equatable {
        var id: UUID
        var origin: Origin
        var method: String
        var target: String
        var idempotencyKey: String
        var fingerprint: [UInt8]
        var priority: OperationPriority
        var tag: String?
        var dependsOn: UUID?
        var createdAt: Int64
        var orderingKey: String?
        var credentials: [UInt8]
        var state: OperationState
        var instance: String?
    }
}

extension OperationRequest {
    /// The request the snapshot describes, with the headers and body its record holds.
    public init(_ snapshot: OperationSnapshot, headers: HTTPHeaders, body: [UInt8]) {
        self.init(id: snapshot.id, origin: snapshot.origin, method: snapshot.method, target: snapshot.target,
                  headers: headers, body: body, idempotencyKey: snapshot.idempotencyKey,
                  fingerprint: snapshot.fingerprint, priority: snapshot.priority, tag: snapshot.tag,
                  dependsOn: snapshot.dependsOn, createdAt: snapshot.createdAt, orderingKey: snapshot.orderingKey,
                  credentials: snapshot.credentials)
    }
}

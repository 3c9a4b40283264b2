import Foundation
import OutboxModel

/// One checksummed record as recovery reads it: the fixed-size fields decoded, the
/// variable-length ones left as bytes that point into the segment's read buffer and are
/// valid only during the call the record is handed to. A million-operation restart builds its
/// index from these without a `String`, an array or a reference count per record; whoever
/// keeps a field copies it out.
///
/// Headers and bodies are never decoded (the state only says whether a stored response or
/// conflict follows). Fields a kind does not have are empty: a `deleted` record has only
/// its id, an `updated` one its id and state.
public struct RecoveryRecord {
    public enum Kind: Sendable {
        case created, updated, deleted
    }

    public let kind: Kind
    public let id: UUID
    public let location: RecordLocation

    // `created` only.
    public let createdAt: Int64
    public let priority: OperationPriority
    public let dependsOn: UUID?
    /// Where its requests go; nil for other kinds.
    public let origin: Origin?
    /// False when this origin is the one of the previous `created` record of the same
    /// segment (every segment's first says true): a consumer seeing the records in log order
    /// may then keep the origin it has instead of copying this one.
    public let originChanged: Bool
    public let method: UnsafeRawBufferPointer
    public let target: UnsafeRawBufferPointer
    public let idempotencyKey: UnsafeRawBufferPointer
    public let fingerprint: UnsafeRawBufferPointer
    public let tag: UnsafeRawBufferPointer?
    public let orderingKey: UnsafeRawBufferPointer?

    // `created` and `updated`.
    public let status: OperationStatus
    public let retryCount: Int
    public let lastAttemptAt: Int64?
    public let nextAttemptAt: Int64?
    public let lastError: UnsafeRawBufferPointer?
    /// Attempts that may have started (`OperationState.attempts`).
    public let attempts: Int
    /// A stored response (or conflict response) follows in the record, not decoded here.
    public let hasResponse: Bool
    public let hasConflict: Bool

    init(kind: Kind, id: UUID, location: RecordLocation, createdAt: Int64 = 0, priority: OperationPriority = .normal,
         dependsOn: UUID? = nil, origin: Origin? = nil, originChanged: Bool = false,
         method: UnsafeRawBufferPointer = .empty, target: UnsafeRawBufferPointer = .empty,
         idempotencyKey: UnsafeRawBufferPointer = .empty, fingerprint: UnsafeRawBufferPointer = .empty,
         tag: UnsafeRawBufferPointer? = nil, orderingKey: UnsafeRawBufferPointer? = nil,
         state: LightState = LightState()) {
        self.kind = kind
        self.id = id
        self.location = location
        self.createdAt = createdAt
        self.priority = priority
        self.dependsOn = dependsOn
        self.origin = origin
        self.originChanged = originChanged
        self.method = method
        self.target = target
        self.idempotencyKey = idempotencyKey
        self.fingerprint = fingerprint
        self.tag = tag
        self.orderingKey = orderingKey
        status = state.status
        retryCount = state.retryCount
        lastAttemptAt = state.lastAttemptAt
        nextAttemptAt = state.nextAttemptAt
        lastError = state.lastError
        attempts = state.attempts
        hasResponse = state.hasResponse
        hasConflict = state.hasConflict
    }

    /// The state part of a `created` or `updated` record, as bytes.
    struct LightState {
        var status = OperationStatus.pending
        var retryCount = 0
        var lastAttemptAt: Int64?
        var nextAttemptAt: Int64?
        var lastError: UnsafeRawBufferPointer?
        var attempts = 0
        var hasResponse = false
        var hasConflict = false
        /// The stored response's (conflict's) body was too large to keep: its size stands in its place.
        var responseBodyOmitted = false
        var conflictBodyOmitted = false

        /// As the model has it; a stored response or conflict is an empty placeholder that
        /// says one follows.
        var state: OperationState {
            var state = OperationState(status: status, retryCount: retryCount, lastAttemptAt: lastAttemptAt,
                                       nextAttemptAt: nextAttemptAt, lastError: lastError.map { String(decoding: $0, as: UTF8.self) },
                                       attempts: attempts)
            if hasResponse { state.response = StoredResponse(status: 0, headers: .init(), body: []) }
            if hasConflict { state.conflict = StoredResponse(status: 0, headers: .init(), body: []) }
            return state
        }
    }

    /// The state as the model has it, without `response` and `conflict` (`withBodies`: with
    /// empty placeholders saying which there are).
    public func state(withBodies: Bool = false) -> OperationState {
        LightState(status: status, retryCount: retryCount, lastAttemptAt: lastAttemptAt, nextAttemptAt: nextAttemptAt,
                   lastError: lastError, attempts: attempts, hasResponse: withBodies && hasResponse,
                   hasConflict: withBodies && hasConflict).state
    }

    /// The created operation as a snapshot; without `requestFields`, method, target and
    /// fingerprint are left empty. Nil for other kinds.
    public func snapshot(requestFields: Bool = true, withBodies: Bool = false) -> OperationSnapshot? {
        guard kind == .created, let origin else { return nil }
        return OperationSnapshot(
            id: id, origin: origin,
            method: requestFields ? String(decoding: method, as: UTF8.self) : "",
            target: requestFields ? String(decoding: target, as: UTF8.self) : "",
            idempotencyKey: String(decoding: idempotencyKey, as: UTF8.self),
            fingerprint: requestFields ? Array(fingerprint) : [], priority: priority,
            tag: tag.map { String(decoding: $0, as: UTF8.self) }, dependsOn: dependsOn, createdAt: createdAt,
            orderingKey: orderingKey.map { String(decoding: $0, as: UTF8.self) }, state: state(withBodies: withBodies))
    }
}

extension UnsafeRawBufferPointer {
    /// No bytes (a field a record kind does not have).
    static var empty: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }
}

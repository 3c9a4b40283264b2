import Foundation
import OutboxHTTP

/// Where an operation stands. `pending` and `inProgress` are "not finished".
public enum OperationStatus: String, Sendable, CaseIterable {
    case pending, inProgress, completed, failed, conflict

    /// Finished operations never go back to a lane by themselves (only an admin retry does).
    public var isFinished: Bool { self == .completed || self == .failed || self == .conflict }
}

/// Replay order within an origin: higher first, FIFO within one priority.
public enum OperationPriority: Int, Sendable, Comparable, CaseIterable {
    case low = 0, normal = 1, high = 2, critical = 3

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The `Outbox-Priority` header value (`low|normal|high|critical`), case-insensitive.
    public init?(headerValue: String) {
        switch headerValue.lowercased() {
        case "low": self = .low
        case "normal": self = .normal
        case "high": self = .high
        case "critical": self = .critical
        default: return nil
        }
    }

    /// Where an unfinished operation of this priority stands in its lane, higher first, ties
    /// in arrival order (SPEC §4): an operation once attempted stays the lane's head until it
    /// ends, so it outranks every priority; the others are ordered by priority, and so are
    /// several attempted ones (after a crash, every operation whose attempt was marked). The
    /// local index keeps this order with a heap of started operations and a heap per priority;
    /// the PostgreSQL store writes it into each row's `lane_rank`.
    public func laneRank(attempted: Bool) -> Int {
        attempted ? OperationPriority.allCases.count + rawValue : rawValue
    }

    public var name: String {
        switch self {
        case .low: "low"
        case .normal: "normal"
        case .high: "high"
        case .critical: "critical"
        }
    }
}

/// An upstream answer kept with an operation: the completed response (kept for
/// `completedRetentionSeconds`, replayed to a client that repeats the idempotency key) or the
/// body of a 409 conflict.
///
/// A body larger than ``maxBodyBytes`` is not kept: it is read to its end and counted, and
/// `omittedBodySize` says how long it was (SPEC §4: never a cut body presented as the whole
/// one). Status and headers are kept either way.
public struct StoredResponse: Sendable, Equatable {
    public var status: Int
    public var headers: HTTPHeaders
    /// The whole body as received; empty when it was omitted.
    public var body: [UInt8]
    /// The length in bytes of a body that was too large to keep (its bytes are gone); nil when
    /// `body` is the whole body.
    public var omittedBodySize: Int?

    /// The largest body kept with an operation: 1 MiB. A longer one is omitted, not cut.
    public static let maxBodyBytes = 1 << 20

    public init(status: Int, headers: HTTPHeaders, body: [UInt8], omittedBodySize: Int? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.omittedBodySize = omittedBodySize
    }
}

/// The immutable part of a stored request: everything needed to replay it, written once
/// when the operation is created.
///
/// `headers` are what goes upstream on every attempt: already rewritten by the proxy rules
/// (Host, Via, X-Forwarded-*), hop-by-hop and `Outbox-*` control headers removed, the
/// idempotency header present. `Outbox-Attempt` is added per attempt, not stored.
public struct OperationRequest: Sendable, Equatable {
    public var id: UUID
    public var origin: Origin
    public var method: String
    /// Origin-form target sent upstream (`/v1/items?x=1`).
    public var target: String
    public var headers: HTTPHeaders
    /// The body's bytes; empty when `spilledBody` holds them.
    public var body: [UInt8]
    /// The body when the proxy kept it in a spill file (it outgrew `limits.bodyMemoryBytes`):
    /// the record encoder copies it from there, in pieces, and `body` stays empty. Only a
    /// request on its way into the log has one; a request read back holds its bytes in `body`.
    package var spilledBody: SpilledBody?
    public var idempotencyKey: String
    /// SHA-256 over method, target and body: "the same request" for idempotency (else 422).
    /// Empty when Outbox made the key up: nobody can repeat that key before its `202` names
    /// it, and the record holds all three, so the queue derives the digest from the record when
    /// a request does come back with it (``IdempotencyKey/fingerprint(of:)``) instead of every
    /// stored request paying for one.
    public var fingerprint: [UInt8]
    public var priority: OperationPriority
    public var tag: String?
    /// The operation id this one waits for (an `Outbox-Depends-On` key is resolved to an id
    /// before the operation is stored).
    public var dependsOn: UUID?
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var createdAt: Int64
    /// Its `Outbox-Ordering-Key`: the lane within the origin; nil is the origin's default lane.
    public var orderingKey: String?
    /// SHA-256 of the client's credential fields (``IdempotencyKey/credentials(in:)``): who may
    /// be given this operation's stored response for a repeated key. Empty when the request had
    /// none.
    public var credentials: [UInt8]

    public init(id: UUID, origin: Origin, method: String, target: String, headers: HTTPHeaders, body: [UInt8],
                idempotencyKey: String, fingerprint: [UInt8], priority: OperationPriority, tag: String?,
                dependsOn: UUID?, createdAt: Int64, orderingKey: String? = nil, credentials: [UInt8] = []) {
        self.id = id
        self.origin = origin
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.idempotencyKey = idempotencyKey
        self.fingerprint = fingerprint
        self.priority = priority
        self.tag = tag
        self.dependsOn = dependsOn
        self.createdAt = createdAt
        self.orderingKey = orderingKey
        self.credentials = credentials
    }

    /// The body's length, wherever it is kept.
    package var bodyCount: Int { spilledBody?.count ?? body.count }
}

/// The mutable part of an operation, written as a new record on every change (attempt
/// started, completed, failed, conflict, retried by an admin).
public struct OperationState: Sendable, Equatable {
    public var status: OperationStatus
    public var retryCount: Int
    /// Milliseconds since the epoch, nil before the first attempt.
    public var lastAttemptAt: Int64?
    /// Not before this (ms since the epoch); nil = as soon as the lane reaches it.
    public var nextAttemptAt: Int64?
    public var lastError: String?
    /// The upstream's response once `completed`.
    public var response: StoredResponse?
    /// The upstream's 409 response once `conflict`.
    public var conflict: StoredResponse?
    /// Attempts that may have started: the highest `Outbox-Attempt` number sent, or about to be
    /// sent, for this operation. Unlike `retryCount` it counts every attempt (an admin retry
    /// does not reset it, a crash does not lose it), so the next attempt's number is always
    /// higher than any sent before (SPEC §4).
    public var attempts: Int

    public init(status: OperationStatus = .pending, retryCount: Int = 0, lastAttemptAt: Int64? = nil,
                nextAttemptAt: Int64? = nil, lastError: String? = nil, response: StoredResponse? = nil,
                conflict: StoredResponse? = nil, attempts: Int = 0) {
        self.status = status
        self.retryCount = retryCount
        self.lastAttemptAt = lastAttemptAt
        self.nextAttemptAt = nextAttemptAt
        self.lastError = lastError
        self.response = response
        self.conflict = conflict
        self.attempts = attempts
    }
}

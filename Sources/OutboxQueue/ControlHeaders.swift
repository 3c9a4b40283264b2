import Foundation
import OutboxHTTP
import OutboxModel

/// The `Outbox-*` request headers that steer queueing, parsed and validated.
///
/// Each header may appear at most once; names are case-insensitive, as are the keyword
/// values of `Outbox-Priority` and `Outbox-Mode`. Accepted values:
/// - `Outbox-Priority`: `low`, `normal`, `high`, `critical` (absent: `normal`).
/// - `Outbox-Tag`: 1–128 characters of visible ASCII or space (`0x20`–`0x7E`); surrounding
///   whitespace is not part of the value (the parser trims it). Spaces are allowed so tags can
///   be words ("nightly import"); non-ASCII is refused so `?tag=` filters compare bytes simply.
/// - `Outbox-Depends-On`: an operation id (UUID) or an idempotency key, kept raw for the queue
///   to resolve: 1–255 visible ASCII characters (`0x21`–`0x7E`), 255 being Stripe's key limit.
/// - `Outbox-Mode`: `queue` (store even when online).
/// - `Outbox-Ordering-Key`: the lane the operation is ordered in, 1–255 visible ASCII characters
///   (`0x21`–`0x7E`), compared byte for byte. Unlike the others it may be repeated with the same
///   value (a client library adding it twice means one lane); two different values name no lane
///   and are refused.
/// Every one of them is removed before a request goes upstream: see `strippedNames`.
public struct ControlHeaders: Sendable, Equatable {
    /// `Outbox-Priority`.
    public static let priorityName = "Outbox-Priority"
    /// `Outbox-Tag`.
    public static let tagName = "Outbox-Tag"
    /// `Outbox-Depends-On`.
    public static let dependsOnName = "Outbox-Depends-On"
    /// `Outbox-Mode`.
    public static let modeName = "Outbox-Mode"
    /// `Outbox-Ordering-Key`.
    public static let orderingKeyName = "Outbox-Ordering-Key"
    /// `Outbox-Attempt`: set by the replayer on each attempt, never taken from a client.
    public static let attemptName = "Outbox-Attempt"
    /// Longest accepted `Outbox-Tag`, in characters.
    public static let maxTagLength = 128
    /// Longest accepted `Outbox-Depends-On`, in characters.
    public static let maxDependsOnLength = 255
    /// Longest accepted `Outbox-Ordering-Key`, in characters.
    public static let maxOrderingKeyLength = 255

    /// Lowercased names removed from every request before it is forwarded or stored: the five
    /// control headers, plus `Outbox-Attempt` so a client cannot forge the replayer's counter.
    /// Suits `HTTPHeaders.removeAll(lowercasedNames:)`.
    public static let strippedNames: Set<String> = [
        "outbox-priority", "outbox-tag", "outbox-depends-on", "outbox-mode", "outbox-ordering-key", "outbox-attempt",
    ]

    /// Replay priority; `normal` when the header is absent.
    public var priority: OperationPriority
    /// The operation's tag, if any.
    public var tag: String?
    /// The raw `Outbox-Depends-On` value: an operation id or an idempotency key.
    public var dependsOn: String?
    /// True for `Outbox-Mode: queue`: store the request even when the origin is online.
    public var forceQueue: Bool
    /// The lane within the origin; nil: the origin's default lane.
    public var orderingKey: String?

    /// Values set directly (tests, or defaults: `normal`, no tag, no dependency, not forced,
    /// default lane).
    public init(priority: OperationPriority = .normal, tag: String? = nil, dependsOn: String? = nil,
                forceQueue: Bool = false, orderingKey: String? = nil) {
        self.priority = priority
        self.tag = tag
        self.dependsOn = dependsOn
        self.forceQueue = forceQueue
        self.orderingKey = orderingKey
    }

    /// Parses the control headers of `headers`; throws for a repeated header or a bad value.
    public init(parsing headers: HTTPHeaders) throws(ControlHeaderError) {
        self.init()
        if let value = try Self.single(Self.priorityName, in: headers) {
            guard let priority = OperationPriority(headerValue: value) else {
                throw .invalidValue(header: Self.priorityName, value: value)
            }
            self.priority = priority
        }
        if let value = try Self.single(Self.tagName, in: headers) {
            guard Self.isText(value, allowSpace: true, maxLength: Self.maxTagLength) else {
                throw .invalidValue(header: Self.tagName, value: value)
            }
            tag = value
        }
        if let value = try Self.single(Self.dependsOnName, in: headers) {
            guard Self.isText(value, allowSpace: false, maxLength: Self.maxDependsOnLength) else {
                throw .invalidValue(header: Self.dependsOnName, value: value)
            }
            dependsOn = value
        }
        if let value = try Self.single(Self.modeName, in: headers) {
            guard value.lowercased() == "queue" else { throw .invalidValue(header: Self.modeName, value: value) }
            forceQueue = true
        }
        let keys = headers.values(Self.orderingKeyName)
        if let key = keys.first {
            guard keys.allSatisfy({ $0 == key }) else { throw .differingValues(header: Self.orderingKeyName) }
            guard Self.isText(key, allowSpace: false, maxLength: Self.maxOrderingKeyLength) else {
                throw .invalidValue(header: Self.orderingKeyName, value: key)
            }
            orderingKey = key
        }
    }

    /// The `Outbox-Depends-On` value as an operation id, when it is a UUID; otherwise the queue
    /// looks it up as an idempotency key.
    public var dependsOnOperationID: UUID? {
        dependsOn.flatMap { UUID(uuidString: $0) }
    }

    private static func single(_ name: String, in headers: HTTPHeaders) throws(ControlHeaderError) -> String? {
        let values = headers.values(name)
        guard values.count <= 1 else { throw .repeated(header: name) }
        return values.first
    }

    private static func isText(_ value: String, allowSpace: Bool, maxLength: Int) -> Bool {
        let bytes = value.utf8
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        let lowest: UInt8 = allowSpace ? 0x20 : 0x21
        return bytes.allSatisfy { $0 >= lowest && $0 <= 0x7E }
    }
}

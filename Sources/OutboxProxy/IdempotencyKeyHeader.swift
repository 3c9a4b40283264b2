import Foundation
import OutboxHTTP
import OutboxModel

/// A request's idempotency header (the one named by `idempotency.header`), checked: absent,
/// one valid key, or refused. A key is 1–255 visible ASCII characters; a request carrying the
/// header twice has no one key, so it is refused rather than guessed at.
enum IdempotencyKeyHeader: Equatable, Sendable {
    /// No such header: the proxy makes up a key.
    case absent
    /// One valid key.
    case given(String)
    /// One header whose value is not a valid key.
    case invalid
    /// The header appears more than once.
    case repeated

    /// Reads the header `name` (case-insensitive) of `headers`.
    init(_ headers: HTTPHeaders, name: String) {
        switch headers.count(of: name) {
        case 0:
            self = .absent
        case 1:
            let key = headers.first(name) ?? ""
            self = IdempotencyKey.isValid(key) ? .given(key) : .invalid
        default:
            self = .repeated
        }
    }
}

extension HTTPHeaders {
    /// Appends `name: <uuid>` with the UUID's lowercase text written straight into the field,
    /// with no String: how a generated idempotency key goes upstream on every direct forward.
    mutating func add(_ name: String, uuid: UUID) {
        var name = name
        name.withUTF8 { nameBytes in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: UUIDText.textLength) { text in
                UUIDText.write(uuid, into: UnsafeMutableRawBufferPointer(text))
                appendValidated(name: nameBytes, value: UnsafeBufferPointer(text))
            }
        }
    }
}

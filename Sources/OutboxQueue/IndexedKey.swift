import Foundation
import OutboxModel

/// An idempotency key as the queue index stores it: a key that is a UUID in canonical form
/// (what Outbox generates, and what most clients send) is kept as its 16 bytes instead of a
/// 36-character heap string; any other key is kept as text. Keys compare exactly
/// (case-sensitively), so the letter case of a UUID key is part of what is kept.
enum IndexedKey: Hashable, Sendable {
    case lowercaseUUID(UUID)
    case uppercaseUUID(UUID)
    case text(String)

    init(_ key: String) {
        switch UUIDText.parse(key) {
        case let (uuid, letterCase)? where letterCase == .upper:
            self = .uppercaseUUID(uuid)
        case let (uuid, letterCase)? where letterCase == .lower || letterCase == .none:
            self = .lowercaseUUID(uuid)
        default:
            self = .text(key)
        }
    }

    /// The key exactly as it was given.
    var string: String {
        switch self {
        case .lowercaseUUID(let uuid): UUIDText.lowercase(uuid)
        case .uppercaseUUID(let uuid): uuid.uuidString
        case .text(let text): text
        }
    }
}

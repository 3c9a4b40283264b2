import Foundation

/// An idempotency key as the queue index stores it: a key that is a UUID in canonical form
/// (what Outbox generates, and what most clients send) is kept as its 16 bytes instead of a
/// 36-character heap string; any other key is kept as text. Keys compare exactly
/// (case-sensitively), so the letter case of a UUID key is part of what is kept.
enum IndexedKey: Hashable, Sendable {
    case lowercaseUUID(UUID)
    case uppercaseUUID(UUID)
    case text(String)

    init(_ key: String) {
        if key.utf8.count == 36, let uuid = UUID(uuidString: key) {
            let upper = uuid.uuidString
            if key == upper {
                self = .uppercaseUUID(uuid)
                return
            }
            if key == upper.lowercased() {
                self = .lowercaseUUID(uuid)
                return
            }
        }
        self = .text(key)
    }

    /// The key exactly as it was given.
    var string: String {
        switch self {
        case .lowercaseUUID(let uuid): uuid.uuidString.lowercased()
        case .uppercaseUUID(let uuid): uuid.uuidString
        case .text(let text): text
        }
    }
}

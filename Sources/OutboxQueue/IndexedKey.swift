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
        self = Self.uuid(UUIDText.parse(key)) ?? .text(key)
    }

    /// The key of these UTF-8 bytes: a `String` is made only for a key that is not a UUID
    /// (recovery reads a million keys out of the log).
    init(utf8 key: UnsafeRawBufferPointer) {
        self = Self.uuid(UUIDText.parse(utf8: key)) ?? .text(String(decoding: key, as: UTF8.self))
    }

    /// A UUID key in the case it was written in; nil for text and mixed case.
    private static func uuid(_ parsed: (UUID, UUIDText.LetterCase)?) -> IndexedKey? {
        switch parsed {
        case let (uuid, letterCase)? where letterCase == .upper: .uppercaseUUID(uuid)
        case let (uuid, letterCase)? where letterCase == .lower || letterCase == .none: .lowercaseUUID(uuid)
        default: nil
        }
    }

    /// One word into the hasher instead of the enum's tag and 16 bytes: recovery hashes a
    /// million keys, and the index's tables rehash them all when they grow. The two halves of
    /// a UUID are folded; the letter case is one more bit, so both forms stay distinct.
    func hash(into hasher: inout Hasher) {
        switch self {
        case .lowercaseUUID(let uuid): hasher.combine(Self.fold(uuid))
        case .uppercaseUUID(let uuid): hasher.combine(~Self.fold(uuid))
        case .text(let text): hasher.combine(text)
        }
    }

    private static func fold(_ uuid: UUID) -> UInt64 {
        withUnsafeBytes(of: uuid.uuid) { $0.loadUnaligned(as: UInt64.self) ^ $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self) }
    }

    /// The hash of the index's key table: a UUID key is mixed like an operation id, with this
    /// process's random seed (clients choose keys) and the letter case as one more bit; only a
    /// text key goes through `Hasher`. Recovery hashes a million keys, and SipHash was a
    /// noticeable part of a restart.
    var tableHash: Int {
        switch self {
        case .lowercaseUUID(let uuid): SlotTable.mix(uuid, seed: Self.seed)
        case .uppercaseUUID(let uuid): SlotTable.mix(uuid, seed: ~Self.seed)
        case .text(let text): text.hashValue
        }
    }

    private static let seed = UInt64.random(in: .min ... .max)

    /// The key exactly as it was given.
    var string: String {
        switch self {
        case .lowercaseUUID(let uuid): UUIDText.lowercase(uuid)
        case .uppercaseUUID(let uuid): uuid.uuidString
        case .text(let text): text
        }
    }
}

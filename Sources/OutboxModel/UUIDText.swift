import Foundation

/// Canonical UUID text (`8-4-4-4-12` hex) written and read by hand: Foundation's
/// `uuidString` and `UUID(uuidString:)` go through printf/scanf, which showed up at several
/// percent of the CPU of a forwarded POST (every queueable request gets or carries a key).
package enum UUIDText {
    package enum LetterCase { case lower, upper, none, mixed }

    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Lowercase canonical text, the one form ids take in headers, JSON and admin URLs.
    package static func lowercase(_ uuid: UUID) -> String {
        withUnsafeBytes(of: uuid.uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { out in
                var position = 0
                for (index, byte) in bytes.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    out[position] = digits[Int(byte >> 4)]
                    out[position + 1] = digits[Int(byte & 0x0F)]
                    position += 2
                }
                return 36
            }
        }
    }

    /// The UUID in canonical text and which letter case its hex digits use; nil otherwise.
    package static func parse(_ text: String) -> (UUID, LetterCase)? {
        var text = text
        return text.withUTF8 { bytes -> (UUID, LetterCase)? in
            guard bytes.count == 36 else { return nil }
            var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            var sawLower = false
            var sawUpper = false
            var nibble = 0
            for index in 0..<36 {
                let byte = bytes[index]
                if index == 8 || index == 13 || index == 18 || index == 23 {
                    guard byte == UInt8(ascii: "-") else { return nil }
                    continue
                }
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10; sawLower = true
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10; sawUpper = true
                default: return nil
                }
                withUnsafeMutableBytes(of: &value) { $0[nibble / 2] |= nibble % 2 == 0 ? digit << 4 : digit }
                nibble += 1
            }
            let uuid = UUID(uuid: value)
            let letterCase: LetterCase = sawLower && sawUpper ? .mixed : sawLower ? .lower : sawUpper ? .upper : .none
            return (uuid, letterCase)
        }
    }
}

extension UUID {
    /// Lowercase canonical text (see ``UUIDText``).
    package var lowercasedText: String { UUIDText.lowercase(self) }
}

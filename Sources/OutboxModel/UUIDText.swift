import Foundation

/// Canonical UUID text (`8-4-4-4-12` hex) written and read by hand: Foundation's
/// `uuidString` and `UUID(uuidString:)` go through printf/scanf, which showed up at several
/// percent of the CPU of a forwarded POST (every queueable request gets or carries a key).
package enum UUIDText {
    package enum LetterCase { case lower, upper, none, mixed }

    /// Lowercase canonical text, the one form ids take in headers, JSON and admin URLs.
    package static func lowercase(_ uuid: UUID) -> String {
        String(unsafeUninitializedCapacity: textLength) { out in
            write(uuid, into: UnsafeMutableRawBufferPointer(out))
            return textLength
        }
    }

    /// Bytes of the canonical text.
    package static let textLength = 36

    /// Writes the lowercase canonical text into the first ``textLength`` bytes of `out`, for
    /// callers that put the id straight into a byte buffer (a header) without a String.
    package static func write(_ uuid: UUID, into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count >= textLength, "UUID text needs 36 bytes")
        withUnsafeBytes(of: uuid.uuid) { bytes in
            var position = 0
            for (index, byte) in bytes.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    out[position] = UInt8(ascii: "-")
                    position += 1
                }
                out[position] = hexDigit(byte >> 4)
                out[position + 1] = hexDigit(byte & 0x0F)
                position += 2
            }
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble
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

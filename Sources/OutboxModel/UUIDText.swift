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
        let text = out.baseAddress.unsafelyUnwrapped
        // Straight-line, two digits per byte and the dashes at their fixed places: the loop
        // that checked every index for a dash cost ~450 instructions a UUID, and a durable 202
        // writes three (its id twice over, a made-up key).
        withUnsafeBytes(of: uuid.uuid) { bytes in
            func digits(_ from: Int, _ to: Int, at start: Int) {
                var position = start
                for index in from..<to {
                    let byte = bytes.load(fromByteOffset: index, as: UInt8.self)
                    text.storeBytes(of: hexDigit(byte >> 4), toByteOffset: position, as: UInt8.self)
                    text.storeBytes(of: hexDigit(byte & 0x0F), toByteOffset: position + 1, as: UInt8.self)
                    position += 2
                }
            }
            digits(0, 4, at: 0)
            digits(4, 6, at: 9)
            digits(6, 8, at: 14)
            digits(8, 10, at: 19)
            digits(10, 16, at: 24)
        }
        let dash = UInt8(ascii: "-")
        text.storeBytes(of: dash, toByteOffset: 8, as: UInt8.self)
        text.storeBytes(of: dash, toByteOffset: 13, as: UInt8.self)
        text.storeBytes(of: dash, toByteOffset: 18, as: UInt8.self)
        text.storeBytes(of: dash, toByteOffset: 23, as: UInt8.self)
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        // A letter digit (10-15) is 39 above where "0" + nibble lands; 9 - nibble wraps past
        // 127 exactly for those, so its top bit picks the 39 without a branch.
        nibble &+ UInt8(ascii: "0") &+ (((9 &- nibble) >> 7) &* 39)
    }
    /// Per byte: its hex value, with `lowerLetter` or `upperLetter` set for a letter digit;
    /// `notHex` for any other byte. One lookup per character: startup parses every stored key.
    private static let hexTable: [UInt8] = (0...255).map { (byte: Int) -> UInt8 in
        switch byte {
        case 0x30...0x39: UInt8(byte - 0x30)
        case 0x61...0x66: UInt8(byte - 0x61 + 10) | lowerLetter
        case 0x41...0x46: UInt8(byte - 0x41 + 10) | upperLetter
        default: notHex
        }
    }
    private static let lowerLetter: UInt8 = 0x20
    private static let upperLetter: UInt8 = 0x40
    private static let notHex: UInt8 = 0x80

    /// The UUID in canonical text and which letter case its hex digits use; nil otherwise.
    package static func parse(_ text: String) -> (UUID, LetterCase)? {
        var text = text
        return text.withUTF8 { parse(utf8: UnsafeRawBufferPointer($0)) }
    }

    /// Like ``parse(_:)``, from UTF-8 bytes: recovery reads a million keys straight out of the
    /// log, and making each a `String` first would cost an allocation per key.
    package static func parse(utf8 bytes: UnsafeRawBufferPointer) -> (UUID, LetterCase)? {
        guard bytes.count == 36 else { return nil }
        let dash = UInt8(ascii: "-")
        guard bytes[8] == dash, bytes[13] == dash, bytes[18] == dash, bytes[23] == dash else { return nil }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var seen: UInt8 = 0
        let valid = hexTable.withUnsafeBufferPointer { table in
            withUnsafeMutableBytes(of: &value) { out -> Bool in
                var position = 0
                for index in 0..<16 {
                    if position == 8 || position == 13 || position == 18 || position == 23 { position += 1 }
                    let high = table[Int(bytes[position])]
                    let low = table[Int(bytes[position + 1])]
                    seen |= high | low
                    out[index] = (high & 0x0F) << 4 | (low & 0x0F)
                    position += 2
                }
                return seen & notHex == 0
            }
        }
        guard valid else { return nil }
        let sawLower = seen & lowerLetter != 0
        let sawUpper = seen & upperLetter != 0
        let letterCase: LetterCase = sawLower && sawUpper ? .mixed : sawLower ? .lower : sawUpper ? .upper : .none
        return (UUID(uuid: value), letterCase)
    }
}

extension UUID {
    /// Lowercase canonical text (see ``UUIDText``).
    package var lowercasedText: String { UUIDText.lowercase(self) }
}

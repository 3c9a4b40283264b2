/// JSON text written straight into bytes, for the answers and events that are rendered once per
/// stored request: the same text `JSON.rendered()` gives for these values, without a `JSON` tree
/// or an intermediate `String`.
extension JSON {
    /// Appends `text` as `JSON.quoted(text)` writes it (quotes included), working on its UTF-8
    /// bytes: a byte below 0x80 that `quoted` escapes is escaped the same way, every other byte
    /// is copied, so the scalars above ASCII come out as the same UTF-8.
    package static func appendQuoted(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { bytes in
            out.append(quote)
            appendEscaped(UnsafeRawBufferPointer(bytes), to: &out)
            out.append(quote)
        }
    }

    /// The number of bytes `appendQuoted(text, to:)` appends, to frame a body before writing it.
    package static func quotedCount(_ text: String) -> Int {
        var text = text
        return text.withUTF8 { escapedCount(UnsafeRawBufferPointer($0)) } + 2
    }

    /// Appends UTF-8 `bytes` escaped as the inside of a JSON string (no quotes), as
    /// `appendQuoted` writes text. Escaping looks at single ASCII bytes only, so a text may be
    /// escaped piece by piece, cut anywhere, and comes out the same.
    package static func appendEscaped(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        if !bytes.contains(where: needsEscape) {
            out.append(contentsOf: bytes)
        } else {
            for byte in bytes { appendEscaped(byte, to: &out) }
        }
    }

    /// The number of bytes `appendEscaped(bytes, to:)` appends.
    package static func escapedCount(_ bytes: UnsafeRawBufferPointer) -> Int {
        var count = bytes.count
        for byte in bytes where needsEscape(byte) {
            count += escapesAsPair(byte) ? 1 : 5
        }
        return count
    }

    /// Whether `bytes` go into a JSON string as they are: nothing to escape. Such text has no
    /// control byte either, so it also goes into an HTTP field value as it is.
    package static func isPlain(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        !bytes.contains(where: needsEscape)
    }

    /// Appends `value` in decimal, as `JSON.int(value)` is written.
    package static func appendInt(_ value: Int, to out: inout [UInt8]) {
        if value < 0 {
            out.append(UInt8(ascii: "-"))
            appendDigits(value.magnitude, to: &out)
        } else {
            appendDigits(UInt(value), to: &out)
        }
    }

    /// Appends the decimal digits of `value`, without sign or padding.
    package static func appendDigits(_ value: UInt, to out: inout [UInt8]) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // room for 20 digits, right-aligned
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                count += 1
                buffer[24 - count] = UInt8(truncatingIfNeeded: 0x30 + rest % 10)
                rest /= 10
            } while rest > 0
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }

    private static let quote = UInt8(ascii: "\"")
    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x7F || byte == quote || byte == UInt8(ascii: "\\")
    }

    private static func escapesAsPair(_ byte: UInt8) -> Bool {
        byte == quote || byte == UInt8(ascii: "\\") || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    private static func appendEscaped(_ byte: UInt8, to out: inout [UInt8]) {
        guard needsEscape(byte) else {
            out.append(byte)
            return
        }
        out.append(UInt8(ascii: "\\"))
        switch byte {
        case quote, UInt8(ascii: "\\"): out.append(byte)
        case 0x0A: out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(UInt8(ascii: "r"))
        case 0x09: out.append(UInt8(ascii: "t"))
        default:
            out.append(contentsOf: [UInt8(ascii: "u"), 0x30, 0x30, hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]])
        }
    }
}

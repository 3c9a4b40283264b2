#if canImport(Glibc)
import Glibc
#endif

/// Byte constants and character classes of the HTTP grammar (RFC 9110 §5.6, RFC 9112 §2,
/// RFC 3986 §3.2.2), written as bit masks so a class test is a shift and an `and`, no table
/// lookup, no String.
package enum HTTPByte {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let space: UInt8 = 0x20
    static let htab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let comma: UInt8 = 0x2C
    static let equals: UInt8 = 0x3D
    static let quote: UInt8 = 0x22
    static let backslash: UInt8 = 0x5C
    static let percent: UInt8 = 0x25

    // tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|"
    //       / "~" / DIGIT / ALPHA                                       (RFC 9110 §5.6.2)
    private static let tcharLow: UInt64 = 0x03ff_6cfa_0000_0000
    private static let tcharHigh: UInt64 = 0x57ff_ffff_c7ff_fffe
    // unreserved / sub-delims (RFC 3986 §2.2, §2.3): the reg-name bytes other than pct-encoded.
    private static let regNameLow: UInt64 = 0x2bff_7fd2_0000_0000
    private static let regNameHigh: UInt64 = 0x47ff_fffe_87ff_fffe

    @inline(__always)
    private static func inMask(_ byte: UInt8, _ low: UInt64, _ high: UInt64) -> Bool {
        if byte < 64 { return (low >> UInt64(byte)) & 1 == 1 }
        if byte < 128 { return (high >> UInt64(byte &- 64)) & 1 == 1 }
        return false
    }

    /// A `tchar`, the bytes of a token such as a method or field name (RFC 9110 §5.6.2).
    @inline(__always)
    package static func isTokenChar(_ byte: UInt8) -> Bool { inMask(byte, tcharLow, tcharHigh) }

    /// `unreserved / sub-delims` of RFC 3986, the bytes of a reg-name besides `%HH`.
    @inline(__always)
    static func isRegNameChar(_ byte: UInt8) -> Bool { inMask(byte, regNameLow, regNameHigh) }

    /// OWS / BWS bytes: SP and HTAB (RFC 9110 §5.6.3).
    @inline(__always)
    static func isWhitespace(_ byte: UInt8) -> Bool { byte == space || byte == htab }

    /// field-vchar / SP / HTAB, obs-text allowed (RFC 9110 §5.5): anything but CTLs and DEL,
    /// HTAB excepted. The same set is allowed in a reason phrase (RFC 9112 §4).
    @inline(__always)
    static func isFieldValueChar(_ byte: UInt8) -> Bool {
        (byte >= 0x20 && byte != 0x7F) || byte == htab
    }

    /// True when every byte is `isFieldValueChar`. Checks eight bytes per step (a word with no
    /// byte below 0x20 and none equal to 0x7F is valid as a whole), since long values such as
    /// cookies and tokens are most of a head's bytes.
    static func isValidFieldValue(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= bytes.count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                // Classic SWAR tests, exact for "any byte": below 0x20, and equal to 0x7F.
                let below = (word &- 0x2020_2020_2020_2020) & ~word & 0x8080_8080_8080_8080
                let del = word ^ 0x7F7F_7F7F_7F7F_7F7F
                let isDel = (del &- 0x0101_0101_0101_0101) & ~del & 0x8080_8080_8080_8080
                // A hit may be an allowed HTAB: let the byte loop decide from here.
                if below | isDel != 0 { break }
                index += 8
            }
        }
        while index < bytes.count {
            guard isFieldValueChar(bytes[index]) else { return false }
            index += 1
        }
        return true
    }

    /// `DIGIT` (RFC 5234 B.1).
    @inline(__always)
    package static func isDigit(_ byte: UInt8) -> Bool { byte &- 0x30 < 10 }

    /// The value of a `HEXDIG` (either case), or nil.
    @inline(__always)
    static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30...0x39: return Int(byte &- 0x30)
        case 0x41...0x46: return Int(byte &- 0x41 &+ 10)
        case 0x61...0x66: return Int(byte &- 0x61 &+ 10)
        default: return nil
        }
    }

    /// ASCII lowercase; other bytes unchanged. Field names are case-insensitive (RFC 9110 §5.1).
    @inline(__always)
    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte &- 0x41 < 26 ? byte | 0x20 : byte
    }

    /// Eight bytes ASCII-lowercased at once, as ``lowercased(_:)`` does one: 0x20 is set in each
    /// byte from `A` to `Z`. Per byte, adding 0x3F (0x25) to its low seven bits sets bit 7
    /// exactly when they are at least 0x41 (0x5B); no sum carries into the next byte. Bytes
    /// with bit 7 set (not ASCII) are left alone.
    @inline(__always)
    static func lowercasedWord(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let low7 = word & (0x7F &* ones)
        let atLeastA = low7 &+ (0x3F &* ones)
        let pastZ = low7 &+ (0x25 &* ones)
        let upper = atLeastA & ~pastZ & ~word & (0x80 &* ones)
        return word | (upper >> 2)
    }

    /// Index of the first `byte` in `buffer[range]`, or nil; memchr, since finding line ends is
    /// the hottest loop of the codec.
    @inline(__always)
    static func firstIndex(of byte: UInt8, in buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int? {
        guard !range.isEmpty, let base = buffer.baseAddress else { return nil }
        #if canImport(Glibc)
        guard let found = memchr(base + range.lowerBound, Int32(byte), range.count) else { return nil }
        return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        #else
        var index = range.lowerBound
        while index < range.upperBound {
            if base[index] == byte { return index }
            index += 1
        }
        return nil
        #endif
    }

    /// Case-insensitive ASCII comparison of two byte strings. Eight bytes per step: every
    /// field name of every forwarded head is compared against the hop-by-hop and framing
    /// names, and most names are longer than eight bytes.
    @inline(__always)
    package static func equalsIgnoringCase(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        var index = 0
        if let left = a.baseAddress, let right = b.baseAddress {
            while index + 8 <= a.count {
                let x = UnsafeRawPointer(left).loadUnaligned(fromByteOffset: index, as: UInt64.self)
                let y = UnsafeRawPointer(right).loadUnaligned(fromByteOffset: index, as: UInt64.self)
                if x != y && lowercasedWord(x) != lowercasedWord(y) { return false }
                index += 8
            }
        }
        while index < a.count {
            if lowercased(a[index]) != lowercased(b[index]) { return false }
            index += 1
        }
        return true
    }

    /// Splits `bytes` on commas into OWS-trimmed list elements (RFC 9110 §5.6.1) and calls
    /// `body` with each non-empty one. A comma inside a quoted parameter value splits too: the
    /// lists read here (Connection, Transfer-Encoding, Content-Length) carry bare tokens, and a
    /// split quoted value only makes an already unsupported element invalid.
    @inline(__always)
    static func forEachListElement<E: Error>(
        _ bytes: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) throws(E) -> Void
    ) throws(E) {
        var start = 0
        while start <= bytes.count {
            var end = start
            while end < bytes.count && bytes[end] != comma { end += 1 }
            var lower = start
            var upper = end
            while lower < upper && isWhitespace(bytes[lower]) { lower += 1 }
            while upper > lower && isWhitespace(bytes[upper - 1]) { upper -= 1 }
            // RFC 9110 §5.6.1: a recipient MUST accept (and ignore) empty list elements.
            if lower < upper { try body(UnsafeBufferPointer(rebasing: bytes[lower..<upper])) }
            start = end + 1
        }
    }
}

/// Base64 (RFC 4648 §4, standard alphabet, `=` padding, no line breaks) written straight into
/// bytes: the text Foundation's `base64EncodedString()` gives, produced piece by piece, so that
/// a body of megabytes is encoded through a small buffer instead of as one string.
package enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The length of the encoding of `count` bytes.
    package static func encodedCount(_ count: Int) -> Int {
        (count + 2) / 3 * 4
    }

    /// Appends the encoding of `bytes`. Pieces of a longer input encode to the pieces of its
    /// encoding when every piece but the last is a multiple of 3 bytes long.
    package static func append(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        let count = bytes.count
        guard count > 0 else { return }
        let encoded = [UInt8](unsafeUninitializedCapacity: encodedCount(count)) { buffer, initialized in
            guard let target = buffer.baseAddress, let source = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
                return
            }
            alphabet.withUnsafeBufferPointer { table in
                guard let table = table.baseAddress else { return }
                var o = target
                var i = 0
                while i + 3 <= count {
                    let word = UInt32(source[i]) << 16 | UInt32(source[i + 1]) << 8 | UInt32(source[i + 2])
                    o[0] = table[Int(word >> 18)]
                    o[1] = table[Int(word >> 12 & 0x3F)]
                    o[2] = table[Int(word >> 6 & 0x3F)]
                    o[3] = table[Int(word & 0x3F)]
                    i += 3
                    o += 4
                }
                let rest = count - i
                guard rest > 0 else { return }
                let word = UInt32(source[i]) << 16 | (rest == 2 ? UInt32(source[i + 1]) << 8 : 0)
                o[0] = table[Int(word >> 18)]
                o[1] = table[Int(word >> 12 & 0x3F)]
                o[2] = rest == 2 ? table[Int(word >> 6 & 0x3F)] : UInt8(ascii: "=")
                o[3] = UInt8(ascii: "=")
            }
            initialized = encodedCount(count)
        }
        out.append(contentsOf: encoded)
    }
}

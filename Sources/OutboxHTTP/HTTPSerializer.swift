/// Serialisation of heads and chunked framing (RFC 9112 §3, §4, §7.1). A head is appended to
/// the buffer in one go (capacity reserved first) so callers can send it with one syscall.
/// Strings are written as given; CR, LF and NUL are replaced by SP so that no caller mistake
/// can split a message.
public enum HTTPSerializer {
    private static let crlf: [UInt8] = [HTTPByte.cr, HTTPByte.lf]

    /// Appends `method SP target SP version CRLF`, the fields, and the blank line.
    public static func writeRequestHead(_ head: HTTPRequestHead, into buffer: inout [UInt8]) {
        reserve(head.method.utf8.count + head.target.utf8.count + 12 + head.headers.byteCount + 2, in: &buffer)
        appendSanitized(head.method, into: &buffer)
        buffer.append(HTTPByte.space)
        appendSanitized(head.target, into: &buffer)
        buffer.append(HTTPByte.space)
        appendVersion(head.version, into: &buffer)
        buffer.append(contentsOf: crlf)
        head.headers.write(into: &buffer)
        buffer.append(contentsOf: crlf)
    }

    /// Appends `version SP status SP reason CRLF`, the fields, and the blank line. The SP
    /// before an empty reason is kept, as the grammar requires (RFC 9112 §4).
    public static func writeResponseHead(_ head: HTTPResponseHead, into buffer: inout [UInt8]) {
        reserve(head.reason.utf8.count + 15 + head.headers.byteCount + 2, in: &buffer)
        appendVersion(head.version, into: &buffer)
        buffer.append(HTTPByte.space)
        // status-code = 3DIGIT; a code outside 100...999 is a caller bug, clamped to stay
        // three digits rather than write an unparseable line.
        let status = Swift.min(Swift.max(head.status, 100), 999)
        buffer.append(UInt8(truncatingIfNeeded: 0x30 + status / 100))
        buffer.append(UInt8(truncatingIfNeeded: 0x30 + status / 10 % 10))
        buffer.append(UInt8(truncatingIfNeeded: 0x30 + status % 10))
        buffer.append(HTTPByte.space)
        appendSanitized(head.reason, into: &buffer)
        buffer.append(contentsOf: crlf)
        head.headers.write(into: &buffer)
        buffer.append(contentsOf: crlf)
    }

    /// Appends one chunk, `hex-size CRLF data CRLF`; nothing for empty data, since an empty
    /// chunk would be the last-chunk (RFC 9112 §7.1).
    public static func writeChunk(_ bytes: UnsafeRawBufferPointer, into buffer: inout [UInt8]) {
        guard !bytes.isEmpty else { return }
        reserve(bytes.count + 20, in: &buffer)
        appendChunkSize(bytes.count, into: &buffer)
        buffer.append(contentsOf: bytes)
        buffer.append(contentsOf: crlf)
    }

    /// Appends one chunk of `bytes`; nothing when empty.
    public static func writeChunk(_ bytes: ArraySlice<UInt8>, into buffer: inout [UInt8]) {
        guard !bytes.isEmpty else { return }
        reserve(bytes.count + 20, in: &buffer)
        appendChunkSize(bytes.count, into: &buffer)
        buffer.append(contentsOf: bytes)
        buffer.append(contentsOf: crlf)
    }

    /// Appends the last chunk `0 CRLF`, the trailer fields, and the final CRLF.
    public static func writeLastChunk(trailers: HTTPHeaders, into buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "0"))
        buffer.append(contentsOf: crlf)
        trailers.write(into: &buffer)
        buffer.append(contentsOf: crlf)
    }

    /// Makes room for `extra` more bytes with one allocation at most. Growth stays geometric:
    /// `reserveCapacity` with the exact size on every call would copy the buffer each time
    /// and make writing many chunks into one buffer quadratic.
    private static func reserve(_ extra: Int, in buffer: inout [UInt8]) {
        let needed = buffer.count + extra
        if buffer.capacity < needed { buffer.reserveCapacity(Swift.max(needed, buffer.capacity * 2)) }
    }

    private static func appendChunkSize(_ size: Int, into buffer: inout [UInt8]) {
        var shift = (Int.bitWidth - size.leadingZeroBitCount + 3) / 4 * 4 - 4
        while shift >= 0 {
            let nibble = (size >> shift) & 0xF
            buffer.append(UInt8(truncatingIfNeeded: nibble < 10 ? 0x30 + nibble : 0x61 + nibble - 10))
            shift -= 4
        }
        buffer.append(contentsOf: crlf)
    }

    private static func appendVersion(_ version: HTTPVersion, into buffer: inout [UInt8]) {
        buffer.append(contentsOf: "HTTP/".utf8)
        appendDecimal(version.major, into: &buffer)
        buffer.append(UInt8(ascii: "."))
        appendDecimal(version.minor, into: &buffer)
    }

    private static func appendDecimal(_ value: Int, into buffer: inout [UInt8]) {
        if (0..<10).contains(value) {
            buffer.append(UInt8(truncatingIfNeeded: 0x30 + value))
        } else {
            buffer.append(contentsOf: String(value).utf8)
        }
    }

    /// Appends `string`'s UTF-8 with CR, LF and NUL written as spaces, so a value can never end
    /// its line early.
    package static func appendSanitized(_ string: String, into buffer: inout [UInt8]) {
        var string = string
        string.withUTF8 { bytes in
            if !bytes.contains(where: { $0 == HTTPByte.cr || $0 == HTTPByte.lf || $0 == 0 }) {
                buffer.append(contentsOf: bytes)
                return
            }
            for byte in bytes {
                buffer.append(byte == HTTPByte.cr || byte == HTTPByte.lf || byte == 0 ? HTTPByte.space : byte)
            }
        }
    }
}

/// Finds the end of the next line of a head, trailer section or chunk-size line, remembering how
/// far it has looked so that a line arriving in many pieces is scanned once (no quadratic work
/// when fed a byte at a time). It keeps a count relative to the caller's index, never an
/// absolute index, because the caller may move unconsumed bytes between calls.
struct HTTPLineScanner: Sendable {
    /// Bytes of the current unfinished line already searched for LF, counted from the index.
    private(set) var scanned = 0

    /// Looks for the line starting at `start`. Returns the line's content (without CRLF or LF)
    /// and the index just past its end, or nil when more bytes are needed. Throws `tooLong` once
    /// it is certain the line, terminator included, is longer than `limit` bytes, `.bareCR`
    /// for a CR inside the line that is not the one right before its LF, and, with
    /// `requiresCRLF`, `.bareLF` for a line ending in LF alone.
    mutating func nextLine(
        in buffer: UnsafeBufferPointer<UInt8>, from start: Int, limit: Int, tooLong: HTTPParseError,
        requiresCRLF: Bool = false
    ) throws(HTTPParseError) -> (content: Range<Int>, next: Int)? {
        let window = min(max(limit, 0), buffer.count - start)
        guard let lineFeed = HTTPByte.firstIndex(of: HTTPByte.lf, in: buffer, (start + min(scanned, window))..<(start + window)) else {
            // `limit` bytes and no LF yet: any terminator would come past the limit, so this is
            // known now; waiting would let a peer grow our buffer (slowloris by size).
            if window >= limit { throw tooLong }
            scanned = window
            return nil
        }
        scanned = 0
        // RFC 9112 §2.2: a line ends in CRLF; a recipient MAY accept a bare LF as well, in the
        // start line and fields. The caller refuses it where a peer would split differently.
        var contentEnd = lineFeed
        if contentEnd > start && buffer[contentEnd - 1] == HTTPByte.cr {
            contentEnd -= 1
        } else if requiresCRLF {
            throw .bareLF
        }
        // RFC 9112 §2.2: a bare CR (not followed by LF) MUST be rejected or replaced by SP;
        // replacing would make us read the line differently from a peer, so we reject.
        if HTTPByte.firstIndex(of: HTTPByte.cr, in: buffer, start..<contentEnd) != nil { throw .bareCR }
        return (start..<contentEnd, lineFeed + 1)
    }

    /// Forgets progress, for the next line after the caller consumed one or reset.
    mutating func reset() { scanned = 0 }
}

/// Reads a body after its head: counts down a Content-Length, decodes chunked framing
/// (RFC 9112 §7.1), or passes everything through until close. Data is never copied: each
/// `.body` is a range of the caller's buffer.
struct HTTPBodyDecoder: Sendable {
    /// What the decoder found.
    enum Event {
        /// Body bytes at this range of the buffer; never empty.
        case body(Range<Int>)
        /// The body is complete.
        case end(trailers: HTTPHeaders)
    }

    private enum Mode: Sendable {
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case untilClose
        /// All body bytes are in; `.end` is next.
        case complete
    }

    private var mode: Mode
    private let limits: HTTPParserLimits
    /// Body bytes announced so far, for `maxBodyBytes`.
    private var received = 0
    private var scanner = HTTPLineScanner()
    private var trailerBytes = 0
    private var trailers = HTTPHeaders()

    /// A decoder for a body framed as `framing`.
    init(framing: HTTPBodyFraming, limits: HTTPParserLimits) {
        self.limits = limits
        switch framing {
        case .none, .contentLength(0): mode = .complete
        case .contentLength(let length): mode = .fixed(remaining: length)
        case .chunked: mode = .chunkSize
        case .untilClose: mode = .untilClose
        }
    }

    /// True when every body byte has arrived and only `.end` is left to report.
    var isComplete: Bool {
        if case .complete = mode { return true }
        return false
    }

    /// True for a close-delimited body, which the peer's close completes.
    var endsAtClose: Bool {
        if case .untilClose = mode { return true }
        return false
    }

    /// The next event from `buffer[index...]`, or nil when more bytes are needed.
    mutating func next(in buffer: UnsafeBufferPointer<UInt8>, index: inout Int) throws(HTTPParseError) -> Event? {
        while true {
            switch mode {
            case .fixed(let remaining):
                let count = min(remaining, buffer.count - index)
                guard count > 0 else { return nil }
                mode = count == remaining ? .complete : .fixed(remaining: remaining - count)
                index += count
                return .body((index - count)..<index)

            case .untilClose:
                let count = buffer.count - index
                guard count > 0 else { return nil }
                if let maxBody = limits.maxBodyBytes, count > maxBody - received { throw .bodyTooLarge }
                received += count
                index += count
                return .body((index - count)..<index)

            case .chunkSize:
                // The chunk-size line, extensions included, is bounded like a head so that a
                // peer cannot make us buffer an endless extension. It ends in CRLF only: a
                // peer that reads a bare LF as part of an extension would see a different
                // chunk (Go's net/http refuses it as well).
                guard let (content, next) = try scanner.nextLine(
                    in: buffer, from: index, limit: limits.maxHeaderBytes, tooLong: .invalidChunk, requiresCRLF: true)
                else { return nil }
                let size = try Self.parseChunkSizeLine(UnsafeBufferPointer(rebasing: buffer[content]))
                index = next
                if size == 0 {
                    // RFC 9112 §7.1: last-chunk, then the trailer section.
                    mode = .trailers
                    continue
                }
                // Refused before any byte of the chunk that crosses the limit is handed on.
                if let maxBody = limits.maxBodyBytes, size > maxBody - received { throw .bodyTooLarge }
                received += size
                mode = .chunkData(remaining: size)

            case .chunkData(let remaining):
                let count = min(remaining, buffer.count - index)
                guard count > 0 else { return nil }
                mode = count == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - count)
                index += count
                return .body((index - count)..<index)

            case .chunkDataEnd:
                // RFC 9112 §7.1: chunk-data is followed by exactly CRLF; anything else means
                // the size lied, a smuggling attempt. A bare LF is refused too: the bare-LF
                // leniency of §2.2 covers the head, not chunk framing, and a peer that skips
                // two bytes here would start the next chunk one byte later than we do.
                guard index < buffer.count else { return nil }
                if buffer[index] == HTTPByte.lf { throw .bareLF }
                guard buffer[index] == HTTPByte.cr else { throw .invalidChunk }
                guard index + 1 < buffer.count else { return nil }
                guard buffer[index + 1] == HTTPByte.lf else { throw .invalidChunk }
                index += 2
                mode = .chunkSize

            case .trailers:
                // RFC 9112 §7.1.2: trailer-section = *( field-line CRLF ), then CRLF. CRLF only:
                // a peer that does not end the section at a bare LF would take the next
                // request for more trailers.
                guard let (content, next) = try scanner.nextLine(
                    in: buffer, from: index, limit: limits.maxHeaderBytes - trailerBytes, tooLong: .headerTooLarge,
                    requiresCRLF: true)
                else { return nil }
                trailerBytes += next - index
                index = next
                if content.isEmpty {
                    mode = .complete
                    continue
                }
                do {
                    try HTTPFieldLine.parse(UnsafeBufferPointer(rebasing: buffer[content]), into: &trailers)
                } catch {
                    // Field-line rules apply as in the head (obs-fold included); reported as
                    // a bad chunked body.
                    throw .invalidChunk
                }

            case .complete:
                let result = trailers
                trailers = HTTPHeaders()
                return .end(trailers: result)
            }
        }
    }

    /// `chunk-size [ chunk-ext ]` (RFC 9112 §7.1, §7.1.1): returns the size; extensions are
    /// checked and skipped, as a recipient MUST ignore unrecognized ones.
    static func parseChunkSizeLine(_ line: UnsafeBufferPointer<UInt8>) throws(HTTPParseError) -> Int {
        // chunk-size = 1*HEXDIG: no sign, no "0x", no leading whitespace. More than 16 digits
        // or a value past Int.max is refused rather than wrapped (a smuggling vector).
        var index = 0
        var size = 0
        while index < line.count, let digit = HTTPByte.hexValue(line[index]) {
            guard index < 16, size <= (Int.max - digit) / 16 else { throw .invalidChunk }
            size = size * 16 + digit
            index += 1
        }
        guard index > 0 else { throw .invalidChunk }
        // chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
        while index < line.count {
            index = skipWhitespace(line, from: index)
            guard index < line.count, line[index] == HTTPByte.semicolon else { throw .invalidChunk }
            index = skipWhitespace(line, from: index + 1)
            let nameStart = index
            while index < line.count && HTTPByte.isTokenChar(line[index]) { index += 1 }
            guard index > nameStart else { throw .invalidChunk }
            let afterName = skipWhitespace(line, from: index)
            guard afterName < line.count, line[afterName] == HTTPByte.equals else { continue }
            index = skipWhitespace(line, from: afterName + 1)
            // chunk-ext-val = token / quoted-string
            guard index < line.count else { throw .invalidChunk }
            if line[index] == HTTPByte.quote {
                index = try skipQuotedString(line, from: index)
            } else {
                let valueStart = index
                while index < line.count && HTTPByte.isTokenChar(line[index]) { index += 1 }
                guard index > valueStart else { throw .invalidChunk }
            }
        }
        return size
    }

    private static func skipWhitespace(_ line: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var index = start
        while index < line.count && HTTPByte.isWhitespace(line[index]) { index += 1 }
        return index
    }

    /// `quoted-string = DQUOTE *( qdtext / quoted-pair ) DQUOTE` (RFC 9110 §5.6.4); returns
    /// the index after the closing quote.
    private static func skipQuotedString(_ line: UnsafeBufferPointer<UInt8>, from start: Int) throws(HTTPParseError) -> Int {
        var index = start + 1
        while index < line.count {
            let byte = line[index]
            if byte == HTTPByte.quote { return index + 1 }
            if byte == HTTPByte.backslash {
                index += 1
                guard index < line.count, HTTPByte.isFieldValueChar(line[index]) else { throw .invalidChunk }
            } else {
                guard HTTPByte.isFieldValueChar(byte) else { throw .invalidChunk }
            }
            index += 1
        }
        throw .invalidChunk
    }
}

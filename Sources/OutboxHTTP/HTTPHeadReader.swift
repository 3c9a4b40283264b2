/// Reads a message head line by line: skips blank lines before the start line, hands the start
/// line to its parser, parses field lines into `headers`, and reports the blank line that ends
/// the head (RFC 9112 §2.1). Each complete line is consumed at once (copied into `headers`), so
/// the caller's buffer never has to hold a whole head and no byte is scanned twice.
struct HTTPHeadReader: Sendable {
    /// What the reader found.
    enum Progress {
        /// The first non-blank line, for the caller to parse.
        case startLine(UnsafeBufferPointer<UInt8>)
        /// The blank line after the fields: the head is complete.
        case complete
    }

    private var scanner = HTTPLineScanner()
    /// Bytes consumed for this head so far, blank lines before the start line included.
    private(set) var consumed = 0
    private(set) var hasStartLine = false
    /// The fields read so far.
    var headers = HTTPHeaders()

    /// True when nothing but blank lines has been seen since the last reset.
    var isIdle: Bool { !hasStartLine && scanner.scanned == 0 }

    /// Consumes lines from `buffer[index...]` until the start line or the end of the head, or
    /// until more bytes are needed (nil).
    mutating func next(
        in buffer: UnsafeBufferPointer<UInt8>, index: inout Int, maxHeaderBytes: Int
    ) throws(HTTPParseError) -> Progress? {
        while true {
            // The whole head, blank lines before it included, must fit in maxHeaderBytes.
            guard let (content, next) = try scanner.nextLine(
                in: buffer, from: index, limit: maxHeaderBytes - consumed, tooLong: .headerTooLarge)
            else { return nil }
            consumed += next - index
            index = next
            if content.isEmpty {
                // RFC 9112 §2.2: a server SHOULD ignore at least one empty line received
                // before the request-line; we ignore any number, bounded by the size limit.
                if !hasStartLine { continue }
                return .complete
            }
            let line = UnsafeBufferPointer(rebasing: buffer[content])
            if !hasStartLine {
                hasStartLine = true
                // Most heads arrive whole and are small: size the field storage from what is
                // here, capped so a buffer full of body bytes does not pin memory per head.
                headers.reserveCapacity(bytes: min(buffer.count - content.upperBound, maxHeaderBytes, 1024))
                return .startLine(line)
            }
            try HTTPFieldLine.parse(line, into: &headers)
        }
    }

    /// Hands out the fields read and starts over for the next message, reading its fields
    /// into `next` (an empty list, perhaps with room from an earlier head).
    mutating func takeHeaders(next: consuming HTTPHeaders = HTTPHeaders()) -> HTTPHeaders {
        var result = next
        swap(&result, &headers)
        self = HTTPHeadReader(headers: headers)
        return result
    }

    private init(headers: consuming HTTPHeaders) {
        self.headers = headers
    }

    init() {}
}

/// Why bytes were rejected. `status` is what a server answers (400, 413, 431, 501, 505).
public enum HTTPParseError: Error, Sendable, Equatable {
    /// Bad request line or status line.
    case malformedStartLine
    /// Bad field name or value, whitespace before the colon, a CTL in a value, faulty TE.
    case malformedHeader
    /// Line folding (RFC 9112 §5.2).
    case obsFold
    /// A CR not followed by LF in the head or in a chunk line (RFC 9112 §2.2).
    case bareCR
    /// A line of a chunked body ending in LF without CR: after chunk data, a chunk-size line
    /// (the last one included), a trailer line (RFC 9112 §7.1).
    case bareLF
    /// The head (or a trailer section) is larger than `maxHeaderBytes`.
    case headerTooLarge
    /// An HTTP/1.1 request without exactly one syntactically valid Host (RFC 9112 §3.2).
    case invalidHost
    /// Both Content-Length and Transfer-Encoding (RFC 9112 §6.1, §6.3).
    case conflictingFraming
    /// Content-Length not 1*DIGIT, overflowing, or several differing values (RFC 9110 §8.6).
    case invalidContentLength
    /// A request transfer coding other than one final `chunked` (RFC 9112 §6.1).
    case unsupportedTransferEncoding
    /// Bad chunk size or extension, no CRLF after chunk data, bad trailer (RFC 9112 §7.1).
    case invalidChunk
    /// A body longer than `maxBodyBytes`.
    case bodyTooLarge
    /// A well-formed `HTTP/x.y` other than 1.0 and 1.1.
    case unsupportedVersion
    /// The peer closed in the middle of a message.
    case incompleteMessage

    /// The status a server answers with for this error.
    public var status: Int {
        switch self {
        case .headerTooLarge: return 431
        case .unsupportedTransferEncoding: return 501
        case .bodyTooLarge: return 413
        case .unsupportedVersion: return 505
        case .malformedStartLine, .malformedHeader, .obsFold, .bareCR, .bareLF, .invalidHost,
             .conflictingFraming, .invalidContentLength, .invalidChunk, .incompleteMessage:
            return 400
        }
    }

    /// One human sentence for the JSON error body.
    public var message: String {
        switch self {
        case .malformedStartLine: return "The request line or status line is malformed."
        case .malformedHeader: return "A header field is malformed."
        case .obsFold: return "Header line folding (obs-fold) is not allowed."
        case .bareCR: return "A CR character is not followed by LF."
        case .bareLF: return "A line of the chunked body ends in LF without CR; CRLF is required."
        case .headerTooLarge: return "The header section is too large."
        case .invalidHost: return "An HTTP/1.1 request needs exactly one valid Host header."
        case .conflictingFraming: return "The message has both Content-Length and Transfer-Encoding."
        case .invalidContentLength: return "The Content-Length header is invalid."
        case .unsupportedTransferEncoding: return "The Transfer-Encoding is not supported; only chunked is."
        case .invalidChunk: return "The chunked body is malformed."
        case .bodyTooLarge: return "The body is too large."
        case .unsupportedVersion: return "The HTTP version is not supported; use HTTP/1.1 or HTTP/1.0."
        case .incompleteMessage: return "The connection closed before the message was complete."
        }
    }
}

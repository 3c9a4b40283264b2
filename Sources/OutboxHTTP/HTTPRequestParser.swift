/// Byte-fed request parser (a state machine). Events refer to ranges of the caller's buffer.
///
/// Enforces RFC 9112 strictly where leniency would let two parsers disagree about message
/// boundaries (request smuggling): see `HTTPParseError` for what is refused.
public struct HTTPRequestParser: Sendable {
    /// What the parser found.
    public enum Event: Sendable, Equatable {
        /// A complete head and how its body is framed.
        case head(HTTPRequestHead, HTTPBodyFraming)
        /// Body bytes: indices into the `buffer` passed to this `next` call; never empty.
        case body(Range<Int>)
        /// The message is complete; trailer fields of a chunked body, else empty.
        case end(trailers: HTTPHeaders)
    }

    private var reader: HTTPMessageReader
    private var requestLine: (method: String, target: String, version: HTTPVersion)?

    /// A parser enforcing `limits`.
    public init(limits: HTTPParserLimits = HTTPParserLimits()) {
        reader = HTTPMessageReader(limits: limits)
    }

    /// Parses the next event from `buffer[index...]`, advancing `index` past the bytes consumed.
    /// Returns nil when more input is needed (all unconsumed bytes must be passed again, with
    /// more appended; the caller may move them to the start of a new buffer between calls).
    /// Head lines are consumed as they complete, so `index` may advance while nil is returned.
    /// After `.end`, the next call starts the next pipelined request. After the head of a
    /// `CONNECT` request the parser is `isUpgraded` and returns nil forever: the remaining
    /// bytes are tunnel data. Once it threw, it keeps throwing the same error.
    public mutating func next(in buffer: [UInt8], index: inout Int) throws(HTTPParseError) -> Event? {
        switch try reader.next(in: buffer, index: &index, startLine: &requestLine, parse: HTTPStartLine.parseRequestLine) {
        case nil: return nil
        case .body(let range): return .body(range)
        case .end(let trailers): return .end(trailers: trailers)
        case .headComplete:
            do {
                return try completeHead()
            } catch {
                reader.fail(error)
                throw error
            }
        }
    }

    /// The peer closed its side. Throws `.incompleteMessage` when a message was partly received
    /// (head or body); no-op when between messages (leading blank lines don't count).
    public mutating func finish() throws(HTTPParseError) {
        switch reader.closeState {
        case .failed(let error): throw error
        // Every byte of the body arrived; only `.end` was not collected yet.
        case .upgraded, .idle, .bodyComplete: return
        case .partialHead, .bodyEndsAtClose, .partialBody: throw reader.incomplete()
        }
    }

    /// True once a CONNECT head was returned: what follows is tunnel data, not HTTP.
    public var isUpgraded: Bool { reader.isUpgraded }

    /// Gives back the fields of a request head the caller is done with (leaving an empty list):
    /// the parser reads the next head's fields into their storage instead of allocating.
    package mutating func recycle(_ headers: inout HTTPHeaders) { reader.recycle(&headers) }

    /// True between messages with no partial message seen.
    public var isIdle: Bool { reader.isIdle }

    /// Builds the head, decides its framing, and sets up the body reader.
    private mutating func completeHead() throws(HTTPParseError) -> Event? {
        guard let line = requestLine else { throw .malformedStartLine }
        requestLine = nil
        let head = HTTPRequestHead(method: line.method, target: line.target, version: line.version,
                                   headers: reader.takeHeaders())
        let framing = try HTTPFramingRules.requestFraming(head, limits: reader.limits)
        if head.method == "CONNECT" {
            reader.upgrade()
        } else {
            reader.startBody(framing)
        }
        return .head(head, framing)
    }
}

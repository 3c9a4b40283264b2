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

    private enum Phase: Sendable {
        case head
        case body
        case upgraded
        case failed(HTTPParseError)
    }

    private let limits: HTTPParserLimits
    private var phase = Phase.head
    private var headReader = HTTPHeadReader()
    private var requestLine: (method: String, target: String, version: HTTPVersion)?
    private var body = HTTPBodyDecoder(framing: .none, limits: HTTPParserLimits())

    /// A parser enforcing `limits`.
    public init(limits: HTTPParserLimits = HTTPParserLimits()) {
        self.limits = limits
    }

    /// Parses the next event from `buffer[index...]`, advancing `index` past the bytes consumed.
    /// Returns nil when more input is needed (all unconsumed bytes must be passed again, with
    /// more appended; the caller may move them to the start of a new buffer between calls).
    /// Head lines are consumed as they complete, so `index` may advance while nil is returned.
    /// After `.end`, the next call starts the next pipelined request. After the head of a
    /// `CONNECT` request the parser is `isUpgraded` and returns nil forever: the remaining
    /// bytes are tunnel data. Once it threw, it keeps throwing the same error.
    public mutating func next(in buffer: [UInt8], index: inout Int) throws(HTTPParseError) -> Event? {
        if case .failed(let error) = phase { throw error }
        guard index >= 0 && index <= buffer.count else {
            assertionFailure("index \(index) outside the buffer of \(buffer.count) bytes")
            return nil
        }
        do {
            return try buffer.withUnsafeBufferPointer { (bytes) throws(HTTPParseError) -> Event? in
                try step(bytes, index: &index)
            }
        } catch {
            phase = .failed(error)
            throw error
        }
    }

    /// The peer closed its side. Throws `.incompleteMessage` when a message was partly received
    /// (head or body); no-op when between messages (leading blank lines don't count).
    public mutating func finish() throws(HTTPParseError) {
        switch phase {
        case .failed(let error):
            throw error
        case .upgraded:
            return
        case .head:
            if headReader.isIdle { return }
        case .body:
            // Every byte arrived; only `.end` was not collected yet.
            if body.isComplete { return }
        }
        phase = .failed(.incompleteMessage)
        throw .incompleteMessage
    }

    /// True once a CONNECT head was returned: what follows is tunnel data, not HTTP.
    public var isUpgraded: Bool {
        if case .upgraded = phase { return true }
        return false
    }

    /// True between messages with no partial message seen.
    public var isIdle: Bool {
        if case .head = phase { return headReader.isIdle }
        return false
    }

    private mutating func step(_ buffer: UnsafeBufferPointer<UInt8>, index: inout Int) throws(HTTPParseError) -> Event? {
        switch phase {
        case .failed(let error):
            throw error
        case .upgraded:
            return nil
        case .body:
            switch try body.next(in: buffer, index: &index) {
            case nil:
                return nil
            case .body(let range):
                return .body(range)
            case .end(let trailers):
                phase = .head
                return .end(trailers: trailers)
            }
        case .head:
            while let progress = try headReader.next(in: buffer, index: &index, maxHeaderBytes: limits.maxHeaderBytes) {
                switch progress {
                case .startLine(let line):
                    requestLine = try HTTPStartLine.parseRequestLine(line)
                case .complete:
                    return try completeHead()
                }
            }
            return nil
        }
    }

    /// Builds the head, decides its framing, and sets up the body reader.
    private mutating func completeHead() throws(HTTPParseError) -> Event? {
        guard let line = requestLine else { throw .malformedStartLine }
        requestLine = nil
        let head = HTTPRequestHead(method: line.method, target: line.target, version: line.version,
                                   headers: headReader.takeHeaders())
        let framing = try HTTPFramingRules.requestFraming(head, limits: limits)
        if head.method == "CONNECT" {
            phase = .upgraded
        } else {
            body = HTTPBodyDecoder(framing: framing, limits: limits)
            phase = .body
        }
        return .head(head, framing)
    }
}

/// Byte-fed response parser. The caller announces each request it sent, in order, so the
/// parser knows when a response has no body (HEAD, 1xx, 204, 304, 2xx to CONNECT).
public struct HTTPResponseParser: Sendable {
    /// What the parser found.
    public enum Event: Sendable, Equatable {
        /// A complete head and how its body is framed.
        case head(HTTPResponseHead, HTTPBodyFraming)
        /// Body bytes: indices into the `buffer` passed to this `next` call; never empty.
        case body(Range<Int>)
        /// The message is complete; trailer fields of a chunked body, else empty.
        case end(trailers: HTTPHeaders)
    }

    /// The request methods that change how a response is framed (RFC 9112 §6.3).
    enum RequestKind: Sendable {
        case head
        case connect
        case other
    }

    private var reader: HTTPMessageReader
    private var statusLine: (version: HTTPVersion, status: Int, reason: String)?
    /// Requests sent and not yet answered by a final response, oldest at `pendingStart`.
    private var pending: [RequestKind] = []
    private var pendingStart = 0

    /// A parser enforcing `limits` (pass `maxBodyBytes: nil` to stream any size).
    public init(limits: HTTPParserLimits = HTTPParserLimits()) {
        reader = HTTPMessageReader(limits: limits)
    }

    /// Announces that a request with `method` was sent; responses are matched to announced
    /// requests first in, first out, so pipelined requests are supported. A response with
    /// no announced request is framed as a response to GET.
    public mutating func expectResponse(toMethod method: String) {
        // RFC 9110 §9.1: methods are case-sensitive.
        pending.append(method == "HEAD" ? .head : method == "CONNECT" ? .connect : .other)
    }

    /// Parses the next event from `buffer[index...]`, advancing `index` past the bytes consumed,
    /// with the same contract as `HTTPRequestParser.next(in:index:)`. A 1xx other than 101 is
    /// interim: `.head` then `.end`, and the next head answers the same request. After a 101 or
    /// a 2xx to CONNECT the parser is `isUpgraded` and returns nil forever.
    public mutating func next(in buffer: [UInt8], index: inout Int) throws(HTTPParseError) -> Event? {
        switch try reader.next(in: buffer, index: &index, startLine: &statusLine, parse: HTTPStartLine.parseStatusLine) {
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

    /// The peer closed. For `.untilClose` bodies returns `.end(trailers: [])`; mid-message
    /// throws `.incompleteMessage`; between messages returns nil.
    public mutating func finish() throws(HTTPParseError) -> Event? {
        switch reader.closeState {
        case .failed(let error): throw error
        case .upgraded, .idle: return nil
        // RFC 9112 §6.3 item 8: a close-delimited body ends with the connection.
        case .bodyComplete, .bodyEndsAtClose:
            reader.endAtClose()
            return .end(trailers: HTTPHeaders())
        // RFC 9112 §8: a Content-Length or chunked body cut short is incomplete.
        case .partialHead, .partialBody: throw reader.incomplete()
        }
    }

    /// True after a 101 or a 2xx to CONNECT: what follows is tunnel data, not HTTP.
    public var isUpgraded: Bool { reader.isUpgraded }

    /// Gives back the fields of a response head the caller is done with (leaving an empty list):
    /// the parser reads the next head's fields into their storage instead of allocating.
    package mutating func recycle(_ headers: inout HTTPHeaders) { reader.recycle(&headers) }

    /// True between messages with no partial message seen.
    public var isIdle: Bool { reader.isIdle }

    /// Builds the head, decides its framing, and sets up the body reader.
    private mutating func completeHead() throws(HTTPParseError) -> Event? {
        guard let line = statusLine else { throw .malformedStartLine }
        statusLine = nil
        let head = HTTPResponseHead(version: line.version, status: line.status, reason: line.reason,
                                    headers: reader.takeHeaders())
        let request = pendingStart < pending.count ? pending[pendingStart] : .other
        let framing = try HTTPFramingRules.responseFraming(head, requestMethod: request, limits: reader.limits)
        // RFC 9110 §15.2: a 1xx other than 101 is interim; the final response to the same
        // request follows, so the request stays at the front of the queue.
        let isInterim = head.status < 200 && head.status != 101
        if !isInterim { popPending() }
        // RFC 9110 §15.2.2 (101) and §9.3.6 (2xx to CONNECT): the connection stops being HTTP
        // right after this head.
        if head.status == 101 || (request == .connect && (200..<300).contains(head.status)) {
            reader.upgrade()
        } else {
            reader.startBody(framing)
        }
        return .head(head, framing)
    }

    private mutating func popPending() {
        guard pendingStart < pending.count else { return }
        pendingStart += 1
        // Compact now and then so a long keep-alive connection does not grow the queue.
        if pendingStart == pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingStart = 0
        } else if pendingStart >= 64 {
            pending.removeFirst(pendingStart)
            pendingStart = 0
        }
    }
}

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

    private enum Phase: Sendable {
        case head
        case body
        case upgraded
        case failed(HTTPParseError)
    }

    private let limits: HTTPParserLimits
    private var phase = Phase.head
    private var headReader = HTTPHeadReader()
    private var statusLine: (version: HTTPVersion, status: Int, reason: String)?
    private var body = HTTPBodyDecoder(framing: .none, limits: HTTPParserLimits())
    /// Requests sent and not yet answered by a final response, oldest at `pendingStart`.
    private var pending: [RequestKind] = []
    private var pendingStart = 0

    /// A parser enforcing `limits` (pass `maxBodyBytes: nil` to stream any size).
    public init(limits: HTTPParserLimits = HTTPParserLimits()) {
        self.limits = limits
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

    /// The peer closed. For `.untilClose` bodies returns `.end(trailers: [])`; mid-message
    /// throws `.incompleteMessage`; between messages returns nil.
    public mutating func finish() throws(HTTPParseError) -> Event? {
        switch phase {
        case .failed(let error):
            throw error
        case .upgraded:
            return nil
        case .head:
            if headReader.isIdle { return nil }
        case .body:
            // RFC 9112 §6.3 item 8: a close-delimited body ends with the connection.
            if body.endsAtClose || body.isComplete {
                phase = .head
                return .end(trailers: HTTPHeaders())
            }
            // RFC 9112 §8: a Content-Length or chunked body cut short is incomplete.
        }
        phase = .failed(.incompleteMessage)
        throw .incompleteMessage
    }

    /// True after a 101 or a 2xx to CONNECT: what follows is tunnel data, not HTTP.
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
                    statusLine = try HTTPStartLine.parseStatusLine(line)
                case .complete:
                    return try completeHead()
                }
            }
            return nil
        }
    }

    /// Builds the head, decides its framing, and sets up the body reader.
    private mutating func completeHead() throws(HTTPParseError) -> Event? {
        guard let line = statusLine else { throw .malformedStartLine }
        statusLine = nil
        let head = HTTPResponseHead(version: line.version, status: line.status, reason: line.reason,
                                    headers: headReader.takeHeaders())
        let request = pendingStart < pending.count ? pending[pendingStart] : .other
        let framing = try HTTPFramingRules.responseFraming(head, requestMethod: request, limits: limits)
        // RFC 9110 §15.2: a 1xx other than 101 is interim; the final response to the same
        // request follows, so the request stays at the front of the queue.
        let isInterim = head.status < 200 && head.status != 101
        if !isInterim { popPending() }
        // RFC 9110 §15.2.2 (101) and §9.3.6 (2xx to CONNECT): the connection stops being HTTP
        // right after this head.
        if head.status == 101 || (request == .connect && (200..<300).contains(head.status)) {
            phase = .upgraded
        } else {
            body = HTTPBodyDecoder(framing: framing, limits: limits)
            phase = .body
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

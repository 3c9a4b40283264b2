/// What a request parser and a response parser share: the phases of a message (head, body,
/// then the next head; upgraded; failed for good), the head reader and the body decoder.
/// Each parser supplies its start-line grammar and decides, from a complete head, how the
/// body is framed.
struct HTTPMessageReader: Sendable {
    /// What one step found.
    enum Step {
        /// The head's start line and fields are read (fields via `takeHeaders()`); the caller
        /// builds the head and calls `startBody(_:)` or `upgrade()`.
        case headComplete
        case body(Range<Int>)
        case end(trailers: HTTPHeaders)
    }

    private enum Phase: Sendable {
        case head
        case body
        case upgraded
        case failed(HTTPParseError)
    }

    let limits: HTTPParserLimits
    private var phase = Phase.head
    private var headReader = HTTPHeadReader()
    private var body = HTTPBodyDecoder(framing: .none, limits: HTTPParserLimits())

    init(limits: HTTPParserLimits) {
        self.limits = limits
    }

    /// The next step from `buffer[index...]`; `startLine` receives the parsed start line (a
    /// property of the caller, passed in so the reader stays generic). Any error, the
    /// caller's grammar's included, fails the reader for good.
    mutating func next<StartLine>(in buffer: [UInt8], index: inout Int, startLine: inout StartLine?,
                                  parse: (UnsafeBufferPointer<UInt8>) throws(HTTPParseError) -> StartLine)
        throws(HTTPParseError) -> Step? {
        if case .failed(let error) = phase { throw error }
        guard index >= 0 && index <= buffer.count else {
            assertionFailure("index \(index) outside the buffer of \(buffer.count) bytes")
            return nil
        }
        do {
            return try buffer.withUnsafeBufferPointer { (bytes) throws(HTTPParseError) -> Step? in
                try step(bytes, index: &index, startLine: &startLine, parse: parse)
            }
        } catch {
            fail(error)
            throw error
        }
    }

    private mutating func step<StartLine>(_ buffer: UnsafeBufferPointer<UInt8>, index: inout Int, startLine: inout StartLine?,
                                          parse: (UnsafeBufferPointer<UInt8>) throws(HTTPParseError) -> StartLine)
        throws(HTTPParseError) -> Step? {
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
                    startLine = try parse(line)
                case .complete:
                    return .headComplete
                }
            }
            return nil
        }
    }

    /// The fields of the head just completed; the next head's fields go into the spare list.
    mutating func takeHeaders() -> HTTPHeaders {
        var next = HTTPHeaders()
        swap(&next, &spareHeaders)
        return headReader.takeHeaders(next: next)
    }

    /// Takes back the fields of a head its caller is done with, leaving an empty list in their
    /// place: the next head is parsed into their storage, so steady traffic parses heads
    /// without allocating. A list grown by an unusually large head is let go.
    mutating func recycle(_ headers: inout HTTPHeaders) {
        var spent = HTTPHeaders()
        swap(&spent, &headers)
        guard spareHeaders.byteCapacity == 0, spent.byteCapacity <= Self.maxSpareHeaderBytes else { return }
        spent.removeAll(keepingCapacity: true)
        spareHeaders = spent
    }

    private var spareHeaders = HTTPHeaders()
    private static let maxSpareHeaderBytes = 8 * 1024

    /// The head is followed by a body framed as `framing` (possibly none).
    mutating func startBody(_ framing: HTTPBodyFraming) {
        body = HTTPBodyDecoder(framing: framing, limits: limits)
        phase = .body
    }

    /// What follows the head is not HTTP any more (CONNECT, 101).
    mutating func upgrade() { phase = .upgraded }

    mutating func fail(_ error: HTTPParseError) { phase = .failed(error) }

    /// Where the message stands when the peer closes.
    enum CloseState { case failed(HTTPParseError), upgraded, idle, partialHead, bodyComplete, bodyEndsAtClose, partialBody }

    var closeState: CloseState {
        switch phase {
        case .failed(let error): .failed(error)
        case .upgraded: .upgraded
        case .head: headReader.isIdle ? .idle : .partialHead
        case .body: body.isComplete ? .bodyComplete : body.endsAtClose ? .bodyEndsAtClose : .partialBody
        }
    }

    /// Between messages (the phase is `head` with nothing of the next one read).
    var isIdle: Bool {
        if case .head = phase { return headReader.isIdle }
        return false
    }

    var isUpgraded: Bool {
        if case .upgraded = phase { return true }
        return false
    }

    /// `finish()` found the message cut short.
    mutating func incomplete() -> HTTPParseError {
        phase = .failed(.incompleteMessage)
        return .incompleteMessage
    }

    /// A close-delimited (or already complete) body ended with the connection.
    mutating func endAtClose() { phase = .head }
}

/// A response the test upstream sends, described rather than pre-rendered so the same script
/// serves GET and HEAD and can stream bodies far larger than memory.
struct UpstreamResponse: Sendable {
    /// Where the body bytes come from.
    enum Body: Sendable {
        case bytes([UInt8])
        case generated(GeneratedBody)

        var count: Int {
            switch self {
            case .bytes(let bytes): bytes.count
            case .generated(let generated): generated.count
            }
        }
    }

    /// How the body is delimited on the wire.
    enum Framing: Sendable, Equatable {
        case contentLength
        case chunked(chunkSize: Int = 16 * 1024, trailers: [HeaderField] = [])
        /// No length; the upstream closes the connection after the body.
        case closeDelimited
    }

    var status: Int
    var reason: String
    var headers: [HeaderField]
    var body: Body
    var framing: Framing

    /// A response; the framing header (Content-Length or Transfer-Encoding) is added when the
    /// head is rendered unless `headers` already has one.
    init(status: Int = 200, reason: String? = nil, headers: [HeaderField] = [], body: Body = .bytes([]),
         framing: Framing = .contentLength) {
        self.status = status
        self.reason = reason ?? Self.standardReason(status)
        self.headers = headers
        self.body = body
        self.framing = framing
    }

    /// A text/plain response carrying `text`.
    static func text(_ text: String, status: Int = 200, headers: [HeaderField] = [],
                     framing: Framing = .contentLength) -> UpstreamResponse {
        UpstreamResponse(status: status, headers: [HeaderField("Content-Type", "text/plain")] + headers,
                         body: .bytes(Array(text.utf8)), framing: framing)
    }

    /// Whether this status never carries a body (RFC 9110 §6.4.1).
    var statusForbidsBody: Bool {
        (100..<200).contains(status) || status == 204 || status == 304
    }

    private static func standardReason(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        default: "Status \(status)"
        }
    }
}

/// What the test upstream does with a request it has read: the script of a test.
indirect enum UpstreamAction: Sendable {
    case respond(UpstreamResponse)
    /// Waits (at most a minute, or until the upstream stops) for the gate, then does `then`.
    case hold(until: Gate, then: UpstreamAction)
    case closeWithoutAnswer
    /// Writes these bytes (garbage, a partial head) and closes.
    case sendRawThenClose([UInt8])
    /// Writes the response head only, then closes: the body never comes.
    case sendHeadThenClose(UpstreamResponse)
    /// Writes the response head (the body's `Content-Length`), then the body one byte every
    /// `every`, until it is all sent, the peer closes (noted in `closedByPeer`) or the upstream
    /// stops.
    case trickle(UpstreamResponse, every: Duration)
    /// Writes a chunked response head, then chunks without end, as fast as the peer reads them,
    /// until the peer closes (noted in `closedByPeer`), a minute passes or the upstream stops.
    case endless(UpstreamResponse)
    /// Answers nothing and waits (at most a minute, or until the upstream stops) for the peer
    /// to close the connection, which `closedByPeer` notes: what a cancelled exchange looks like.
    case holdUntilPeerCloses
}

import OutboxHTTP

/// Whether the client's connection stays open after a response, and the `Connection` header
/// that tells the client so: the one place the exchange asks, whoever made the response.
///
/// The connection persists only when the client asked for it (HTTP/1.1 unless
/// `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`) and the server is not
/// shutting down, and then only when the next request can be found where it should start: an
/// answer made before the request body was read leaves that body where the next request would
/// be parsed, so it closes (a relayed response drains the body instead), as does an error after
/// which the input cannot be trusted. An HTTP/1.0 client cannot read chunked coding, so an
/// origin's chunked or close-delimited body reaches it close-delimited.
enum KeepAlive {
    /// What the client receives, as far as its connection is concerned.
    enum Response: Equatable, Sendable {
        /// The origin's response, relayed; its body came with this framing.
        case relayed(HTTPBodyFraming)
        /// An answer of the proxy's own: a `202`, a stored response, the admin API.
        case local
        /// An error the proxy answers with this status.
        case error(status: Int)
    }

    /// Whether the client asked to keep its connection open after this request.
    static func requested(by head: HTTPRequestHead) -> Bool {
        if head.version == .http1_1 { return !head.headers.containsToken("close", in: "Connection") }
        return head.headers.containsToken("keep-alive", in: "Connection")
    }

    /// Whether the connection stays open after `response` to `request`.
    /// - Parameters:
    ///   - requestComplete: the request's body has been read to its end.
    ///   - serverDraining: the server is shutting down: every connection closes after its response.
    static func persists(after response: Response, to request: HTTPRequestHead, requestComplete: Bool,
                         serverDraining: Bool) -> Bool {
        guard !serverDraining, requested(by: request) else { return false }
        switch response {
        case .relayed(.chunked), .relayed(.untilClose):
            return request.version == .http1_1
        case .relayed(.none), .relayed(.contentLength):
            return true
        case .local:
            return requestComplete
        case .error(let status):
            switch status {
            // A malformed request, a body too large to read, a header section too large: what
            // follows on the connection is not known to start a request.
            case 400, 413, 431: return false
            default: return requestComplete
            }
        }
    }

    /// The `Connection` value a response carries: `close` when the connection closes,
    /// `keep-alive` for an HTTP/1.0 client whose connection stays open (1.0 closes by default),
    /// none for HTTP/1.1, which persists by default.
    static func connectionHeader(persists: Bool, version: HTTPVersion) -> String? {
        if !persists { return "close" }
        return version == .http1_0 ? "keep-alive" : nil
    }
}

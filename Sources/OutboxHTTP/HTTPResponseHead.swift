/// The status line and header section of a response (RFC 9112 §4, §5).
public struct HTTPResponseHead: Sendable, Equatable {
    /// The protocol version of the status line.
    public var version: HTTPVersion
    /// The three-digit status code (100...599).
    public var status: Int
    /// The reason phrase; may be empty, carries no meaning (RFC 9112 §4).
    public var reason: String
    /// The header fields in received order.
    public var headers: HTTPHeaders

    /// `reason` defaults to the standard phrase for `status` (HTTPStatus.reasonPhrase).
    public init(version: HTTPVersion = .http1_1, status: Int, reason: String? = nil, headers: HTTPHeaders = HTTPHeaders()) {
        self.version = version
        self.status = status
        self.reason = reason ?? HTTPStatus.reasonPhrase(status)
        self.headers = headers
    }
}

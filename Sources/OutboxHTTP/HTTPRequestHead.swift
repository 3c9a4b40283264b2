/// The request line and header section of a request (RFC 9112 §3, §5).
public struct HTTPRequestHead: Sendable, Equatable {
    /// The method token, case-sensitive (RFC 9110 §9.1), e.g. `POST`.
    public var method: String
    /// The request-target exactly as received: origin-, absolute-, authority- or asterisk-form.
    public var target: String
    /// The protocol version of the request line.
    public var version: HTTPVersion
    /// The header fields in received order.
    public var headers: HTTPHeaders

    /// A request head; `version` defaults to HTTP/1.1 and `headers` to none.
    public init(method: String, target: String, version: HTTPVersion = .http1_1, headers: HTTPHeaders = HTTPHeaders()) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }
}

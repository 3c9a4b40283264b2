/// How a message body is delimited (RFC 9112 §6).
public enum HTTPBodyFraming: Sendable, Equatable {
    /// No body: the message ends with its head.
    case none
    /// Exactly this many bytes follow the head (RFC 9112 §6.2).
    case contentLength(Int)
    /// The chunked transfer coding (RFC 9112 §7.1).
    case chunked
    /// A response body that ends when the server closes the connection (RFC 9112 §6.3 item 8).
    case untilClose
}

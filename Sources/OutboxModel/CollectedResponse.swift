import OutboxHTTP

/// A complete upstream response. Its body is kept up to the caller's limit; a longer one is
/// read to its end and counted, but none of it is kept (`truncated`), so that nobody mistakes
/// a cut body for the whole one.
public struct CollectedResponse: Sendable, Equatable {
    public var head: HTTPResponseHead
    /// The whole body, or nothing when `truncated`.
    public var body: [UInt8]
    /// The body was longer than the limit: `body` is empty and `bodySize` its length.
    public var truncated: Bool
    /// Body bytes received (after any transfer coding was removed), kept or not.
    public var bodySize: Int

    package init(head: HTTPResponseHead, body: [UInt8], truncated: Bool, bodySize: Int? = nil) {
        self.head = head
        self.body = body
        self.truncated = truncated
        self.bodySize = bodySize ?? body.count
    }
}

import OutboxHTTP

/// A complete upstream response, its body possibly cut at the caller's limit.
public struct CollectedResponse: Sendable, Equatable {
    public var head: HTTPResponseHead
    public var body: [UInt8]
    public var truncated: Bool

    package init(head: HTTPResponseHead, body: [UInt8], truncated: Bool) {
        self.head = head
        self.body = body
        self.truncated = truncated
    }
}

/// One request exactly as the test upstream received it from the proxy.
struct RecordedRequest: Sendable, CustomStringConvertible {
    /// How the request body was delimited on the wire.
    enum BodyFraming: Sendable, Equatable {
        case none
        case contentLength(Int)
        case chunked
    }

    /// Position in the upstream's log, from 0, across connections.
    let index: Int
    /// Which upstream TCP connection carried it (ids count from 0 per upstream).
    let connectionID: Int
    let method: String
    let target: String
    let version: String
    let headers: HTTPHeaders
    let body: [UInt8]
    let bodyFraming: BodyFraming
    /// Chunk extensions and trailers when the body was chunked.
    let chunkedInfo: ChunkedBodyInfo?
    /// The head as received, request line to blank line inclusive.
    let rawHead: [UInt8]
    /// Bytes this request occupied on the wire: head, body and framing.
    let rawByteCount: Int

    /// The body decoded as UTF-8.
    var bodyText: String { String(decoding: body, as: UTF8.self) }

    var description: String {
        "#\(index) conn \(connectionID): \(method) \(target) \(version), \(body.count) body bytes\n\(headers)"
    }
}

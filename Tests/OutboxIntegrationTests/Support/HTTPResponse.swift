import Foundation

/// A response as a test client saw it: the parsed head, how the body was delimited, and the
/// body itself (or only its length and digest, for bodies too large to keep).
struct HTTPResponse: Sendable, CustomStringConvertible {
    /// How the body was delimited on the wire.
    enum BodyFraming: Sendable, Equatable {
        /// No body by the rules of the method or status.
        case none
        case contentLength(Int)
        case chunked
        /// Read until the proxy closed the connection.
        case closeDelimited
    }

    let version: String
    let status: Int
    let reason: String
    let headers: HTTPHeaders
    let rawHead: [UInt8]
    let framing: BodyFraming
    /// The body, empty when only its digest was kept.
    let body: [UInt8]
    let bodyByteCount: Int
    let bodySHA256: String
    let trailers: HTTPHeaders

    /// The body decoded as UTF-8.
    var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// The `{"error":{"code","message"}}` error envelope, or nil when the body is not one.
    var errorEnvelope: (code: String, message: String)? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let error = object["error"] as? [String: Any],
              let code = error["code"] as? String, let message = error["message"] as? String
        else { return nil }
        return (code, message)
    }

    /// Whether the head announces that the connection closes after this response.
    var announcesClose: Bool {
        headers.tokens("Connection").contains("close")
    }

    var description: String {
        let preview = body.count > 300 ? bodyText.prefix(300) + "…" : Substring(bodyText)
        return "\(version) \(status) \(reason)\n\(headers)\n\n\(preview)"
    }
}

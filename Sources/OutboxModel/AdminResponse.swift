/// An admin API answer: a JSON document (or the one error envelope), or a raw text. The
/// proxy path renders it; it lives below both so the proxy never imports the admin API.
package struct AdminResponse: Sendable {
    package var status: Int
    package var body: JSON
    package var extraHeaders: [(String, String)] = []
    /// A non-JSON answer (metrics text, the dashboard page): content type and bytes.
    package var raw: (contentType: String, text: String)?
    /// `GET /events`: the proxy answers with the live event stream instead of a body. The
    /// request passed the admin gate (token, loopback, `Host`, `Origin`) like any other.
    package var streamsEvents = false
    /// A JSON answer written piece by piece as the client takes it (an operation's view, whose
    /// body may be megabytes), in place of `body`; framed by its known length.
    package var streamed: StreamedJSON?

    package init(status: Int, body: JSON, extraHeaders: [(String, String)] = [], raw: (contentType: String, text: String)? = nil) {
        self.status = status
        self.body = body
        self.extraHeaders = extraHeaders
        self.raw = raw
    }

    /// A JSON answer streamed from `streamed`.
    package init(status: Int, streamed: StreamedJSON) {
        self.init(status: status, body: .null)
        self.streamed = streamed
    }

    /// The one error envelope, shared with the proxy's own errors.
    package static func error(_ code: ErrorCode, _ message: String) -> AdminResponse {
        AdminResponse(status: code.status,
                      body: .object([("error", .object([("code", .string(code.rawValue)), ("message", .string(message))]))]))
    }
}

@testable import OutboxHTTP
@testable import OutboxProxy
import Testing

/// When the client's connection outlives a response, and what `Connection` says: one row per
/// rule, in the terms the KeepAlive and HTTP/1.0 integration suites observe on the wire.
@Suite("Keep-alive rule: whether a response keeps the client connection")
struct KeepAliveRuleTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var rule: String
        var version: HTTPVersion = .http1_1
        var connection: String?
        var response: KeepAlive.Response = .local
        var requestComplete = true
        var serverDraining = false
        var persists: Bool
        /// The `Connection` value sent to the client.
        var header: String?
        var testDescription: String { rule }
    }

    @Test(arguments: [
        Row(rule: "HTTP/1.1 persists by default, saying nothing", persists: true, header: nil),
        Row(rule: "HTTP/1.1 with Connection: close closes", connection: "close", persists: false, header: "close"),
        Row(rule: "the close token is found in a list, in any case", connection: "TE, Close",
            persists: false, header: "close"),
        Row(rule: "HTTP/1.0 closes by default", version: .http1_0, persists: false, header: "close"),
        Row(rule: "HTTP/1.0 with Connection: keep-alive persists and says so", version: .http1_0,
            connection: "Keep-Alive", persists: true, header: "keep-alive"),
        Row(rule: "a server shutting down closes every connection after its response", serverDraining: true,
            persists: false, header: "close"),
        Row(rule: "an answer of our own before the body was read closes", requestComplete: false,
            persists: false, header: "close"),
        Row(rule: "a relayed response before the body was read persists: the body is drained",
            response: .relayed(.contentLength(5)), requestComplete: false, persists: true, header: nil),
        Row(rule: "a chunked response to an HTTP/1.1 client persists (re-chunked)", response: .relayed(.chunked),
            persists: true, header: nil),
        Row(rule: "a close-delimited response to an HTTP/1.1 client persists (re-chunked)",
            response: .relayed(.untilClose), persists: true, header: nil),
        Row(rule: "a chunked response to an HTTP/1.0 client closes: its end is the close", version: .http1_0,
            connection: "keep-alive", response: .relayed(.chunked), persists: false, header: "close"),
        Row(rule: "a close-delimited response to an HTTP/1.0 client closes", version: .http1_0,
            connection: "keep-alive", response: .relayed(.untilClose), persists: false, header: "close"),
        Row(rule: "a sized response to an HTTP/1.0 keep-alive client persists", version: .http1_0,
            connection: "keep-alive", response: .relayed(.contentLength(3)), persists: true, header: "keep-alive"),
        Row(rule: "a bodyless relayed response to an HTTP/1.0 keep-alive client persists", version: .http1_0,
            connection: "keep-alive", response: .relayed(.none), persists: true, header: "keep-alive"),
        Row(rule: "a relayed response while shutting down closes", response: .relayed(.chunked), serverDraining: true,
            persists: false, header: "close"),
        Row(rule: "an error after the whole request persists", response: .error(status: 503), persists: true, header: nil),
        Row(rule: "an error before the body was read closes", response: .error(status: 503), requestComplete: false,
            persists: false, header: "close"),
        Row(rule: "400 closes: what follows is not known to be a request", response: .error(status: 400),
            persists: false, header: "close"),
        Row(rule: "413 closes", response: .error(status: 413), persists: false, header: "close"),
        Row(rule: "431 closes", response: .error(status: 431), persists: false, header: "close"),
        Row(rule: "an error to an HTTP/1.0 client that did not ask to persist closes", version: .http1_0,
            response: .error(status: 502), persists: false, header: "close"),
    ])
    func rule(_ row: Row) {
        var headers: HTTPHeaders = ["Host": "a"]
        if let connection = row.connection { headers.add("Connection", connection) }
        let request = HTTPRequestHead(method: "POST", target: "/items", version: row.version, headers: headers)
        let persists = KeepAlive.persists(after: row.response, to: request, requestComplete: row.requestComplete,
                                          serverDraining: row.serverDraining)
        #expect(persists == row.persists)
        #expect(KeepAlive.connectionHeader(persists: persists, version: row.version) == row.header)
    }
}

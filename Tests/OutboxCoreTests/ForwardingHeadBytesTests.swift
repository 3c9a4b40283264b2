@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxProxy
import Testing

/// The forwarded head is written from bytes (constant names, values copied from the parsed
/// head) and into header lists and parser storage reused from earlier requests: these tests pin
/// the bytes that go upstream, whatever list they were built in.
@Suite("Forwarding head bytes: the rewritten head on the wire, reused storage")
struct ForwardingHeadBytesTests {
    private func head(_ method: String, _ target: String, _ fields: [(String, String)]) -> HTTPRequestHead {
        HTTPRequestHead(method: method, target: target, headers: HTTPHeaders(fields.map { (name: $0.0, value: $0.1) }))
    }

    private func wire(_ head: HTTPRequestHead) -> String {
        var bytes: [UInt8] = []
        HTTPSerializer.writeRequestHead(head, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let method: String
        let target: String
        let fields: [(String, String)]
        let origin: Origin
        let upstreamTarget: String
        let client: String
        let scheme: String
        let framing: HTTPBodyFraming
        let expected: String
        var testDescription: String { name }
    }

    private static let local = Origin(scheme: .http, host: "127.0.0.1", port: 9000)

    private static let cases: [Case] = [
        Case(name: "reverse POST with a length", method: "POST", target: "/echo",
             fields: [("Host", "127.0.0.1:8080"), ("Content-Type", "application/json"), ("Content-Length", "1024")],
             origin: local, upstreamTarget: "/echo", client: "127.0.0.1", scheme: "http", framing: .contentLength(1024),
             expected: "POST /echo HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nContent-Type: application/json\r\n"
                 + "Content-Length: 1024\r\nVia: 1.1 outbox\r\nX-Forwarded-For: 127.0.0.1\r\n"
                 + "X-Forwarded-Proto: http\r\nX-Forwarded-Host: 127.0.0.1:8080\r\n\r\n"),
        Case(name: "hop-by-hop fields and the ones Connection names are dropped", method: "GET", target: "/",
             fields: [("Host", "a.example"), ("Connection", "keep-alive, X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "5"),
                      ("TE", "trailers"), ("Upgrade", "h2c"), ("Proxy-Authorization", "Basic x"), ("Accept", "*/*"),
                      ("Expect", "100-continue"), ("Outbox-Priority", "high")],
             origin: local, upstreamTarget: "/base/", client: "10.1.2.3", scheme: "http", framing: .none,
             expected: "GET /base/ HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nAccept: */*\r\nVia: 1.1 outbox\r\n"
                 + "X-Forwarded-For: 10.1.2.3\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: a.example\r\n\r\n"),
        Case(name: "X-Forwarded-For fields are joined and the client appended; spoofed Proto and Host replaced",
             method: "GET", target: "/x",
             fields: [("X-Forwarded-For", "10.0.0.1"), ("Host", "h.example"), ("x-forwarded-for", "10.0.0.2, 10.0.0.3"),
                      ("X-Forwarded-Proto", "gopher"), ("X-Forwarded-Host", "spoofed.example")],
             origin: local, upstreamTarget: "/x", client: "::1", scheme: "https", framing: .none,
             expected: "GET /x HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nVia: 1.1 outbox\r\n"
                 + "X-Forwarded-For: 10.0.0.1, 10.0.0.2, 10.0.0.3, ::1\r\nX-Forwarded-Proto: https\r\n"
                 + "X-Forwarded-Host: h.example\r\n\r\n"),
        Case(name: "forward mode: the absolute target's authority, chunked re-declared", method: "PUT",
             target: "http://api.local:8081/v1?q=1",
             fields: [("Host", "other.example"), ("Transfer-Encoding", "chunked"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")],
             origin: Origin(scheme: .http, host: "api.local", port: 8081), upstreamTarget: "/v1?q=1", client: "127.0.0.1",
             scheme: "http", framing: .chunked,
             expected: "PUT /v1?q=1 HTTP/1.1\r\nHost: api.local:8081\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
                 + "Transfer-Encoding: chunked\r\nVia: 1.1 outbox\r\nX-Forwarded-For: 127.0.0.1\r\n"
                 + "X-Forwarded-Proto: http\r\nX-Forwarded-Host: api.local:8081\r\n\r\n"),
        Case(name: "HTTP/1.0 client without Host: no X-Forwarded-Host", method: "GET", target: "/",
             fields: [("User-Agent", "old/1.0")],
             origin: Origin(scheme: .http, host: "h", port: 80), upstreamTarget: "/", client: "192.0.2.7", scheme: "http",
             framing: .none,
             expected: "GET / HTTP/1.1\r\nHost: h\r\nUser-Agent: old/1.0\r\nVia: 1.1 outbox\r\n"
                 + "X-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Proto: http\r\n\r\n"),
    ]

    @Test("the upstream head's bytes", arguments: cases)
    private func upstreamHeadBytes(_ c: Case) {
        let client = head(c.method, c.target, c.fields)
        let fresh = ProxyRules.upstreamRequestHead(client, origin: c.origin, target: c.upstreamTarget,
                                                   clientAddress: c.client, bodyFraming: c.framing, clientScheme: c.scheme)
        #expect(wire(fresh) == c.expected)
        // The field table agrees with the bytes: lookups see what the wire carries.
        #expect(fresh.headers.values("Via") == ["1.1 outbox"])
        #expect(fresh.headers.count == c.expected.split(separator: "\r\n").count - 1)
    }

    @Test("a head built into a reused list (emptied, with room from a bigger head) has the same bytes", arguments: cases)
    private func reusedListGivesTheSameBytes(_ c: Case) {
        var spare = HTTPHeaders()
        for index in 0..<40 { spare.add("X-Filler-\(index)", String(repeating: "v", count: 50)) }
        spare.removeAll(keepingCapacity: true)
        let client = head(c.method, c.target, c.fields)
        let reused = ProxyRules.upstreamRequestHead(client, origin: c.origin, target: c.upstreamTarget,
                                                    clientAddress: c.client, bodyFraming: c.framing, clientScheme: c.scheme,
                                                    reusing: spare)
        #expect(wire(reused) == c.expected)
    }

    @Test("a constant-name field equals the String-built one, CR, LF and NUL sanitised alike", arguments: [
        "1.1 outbox", "", "a\r\nInjected: 1", "nul\0byte", "tab\tand obs-text \u{e9}", String(repeating: "x", count: 2000),
    ])
    func constantNameFieldsMatchStringFields(value: String) {
        var bytes = HTTPHeaders()
        bytes.add(field: "X-Test", value: value)
        bytes.add(field: "Via", value: ProxyRules.viaValue)
        var strings = HTTPHeaders()
        strings.add("X-Test", value)
        strings.add("Via", "1.1 outbox")
        var left: [UInt8] = []
        var right: [UInt8] = []
        bytes.write(into: &left)
        strings.write(into: &right)
        #expect(left == right)
        #expect(bytes == strings)
        #expect(!left.contains(0) && left.filter { $0 == 0x0A }.count == 2)
    }

    @Test("Outbox-* fields are found by name prefix in any case, and only as a prefix")
    func controlFieldPrefix() {
        let none: HTTPHeaders = [("Host", "h"), ("X-Outbox-Tag", "t"), ("Outbox", "x")]
        let some: HTTPHeaders = [("Host", "h"), ("OUTBOX-Tag", "t")]
        #expect(!none.containsName(withLowercasedPrefix: "outbox-"))
        #expect(some.containsName(withLowercasedPrefix: "outbox-"))
        #expect(!HTTPHeaders().containsName(withLowercasedPrefix: "outbox-"))
    }

    @Test("a recycled request head's storage serves the next head; a copy kept of the old one is untouched")
    func recycledRequestHeadStorage() throws {
        let input = Array(("POST /a HTTP/1.1\r\nHost: one.example\r\nContent-Length: 2\r\nX-First: 1\r\n\r\nhi"
            + "GET /b HTTP/1.1\r\nHost: two.example\r\nAccept: */*\r\n\r\n").utf8)
        var parser = HTTPRequestParser()
        var index = 0
        guard case .head(var first, _)? = try parser.next(in: input, index: &index) else {
            Issue.record("no first head")
            return
        }
        let kept = first.headers
        parser.recycle(&first.headers)
        #expect(first.headers.isEmpty)
        guard case .body? = try parser.next(in: input, index: &index), case .end? = try parser.next(in: input, index: &index),
              case .head(let second, _)? = try parser.next(in: input, index: &index) else {
            Issue.record("no second head")
            return
        }
        #expect(lines(kept) == ["Host: one.example", "Content-Length: 2", "X-First: 1"])
        #expect(lines(second.headers) == ["Host: two.example", "Accept: */*"])
        #expect(second.target == "/b")
    }

    @Test("a recycled response head's storage serves the next response of the connection")
    func recycledResponseHeadStorage() throws {
        let input = Array(("HTTP/1.1 201 Created\r\nContent-Length: 2\r\nX-One: 1\r\n\r\nok"
            + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Two: 2\r\n\r\n").utf8)
        var parser = HTTPResponseParser()
        var index = 0
        parser.expectResponse(toMethod: "POST")
        guard case .head(var first, _)? = try parser.next(in: input, index: &index) else {
            Issue.record("no first head")
            return
        }
        #expect(lines(first.headers) == ["Content-Length: 2", "X-One: 1"])
        parser.recycle(&first.headers)
        guard case .body? = try parser.next(in: input, index: &index), case .end? = try parser.next(in: input, index: &index)
        else {
            Issue.record("no first body")
            return
        }
        parser.expectResponse(toMethod: "GET")
        guard case .head(let second, _)? = try parser.next(in: input, index: &index) else {
            Issue.record("no second head")
            return
        }
        #expect(second.status == 200)
        #expect(lines(second.headers) == ["Content-Length: 0", "X-Two: 2"])
    }
}

@testable import OutboxConfig
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxNet
@testable import OutboxProxy
import Testing

@Suite("Proxy rules: routing, hop-by-hop and forwarding headers")
struct ProxyRulesTests {
    let upstream = UpstreamURL(scheme: .http, host: "127.0.0.1", port: 9000, basePath: "/api")
    let forward = OutboxConfig.ForwardProxy()

    func head(_ method: String, _ target: String, _ headers: [(String, String)] = [("Host", "proxy.local")]) -> HTTPRequestHead {
        HTTPRequestHead(method: method, target: target, headers: HTTPHeaders(headers.map { (name: $0.0, value: $0.1) }))
    }

    @Test("origin-form goes to the upstream with its base path joined")
    func originFormJoinsBasePath() {
        let route = ProxyRules.route(head("POST", "/v1/items?x=1"), upstream: upstream, forwardProxy: forward)
        #expect(route == .success(.origin(Origin(scheme: .http, host: "127.0.0.1", port: 9000), target: "/api/v1/items?x=1", forwardMode: false)))
    }

    @Test("origin-form without an upstream is a 502 no_upstream")
    func originFormWithoutUpstreamFails() {
        let route = ProxyRules.route(head("GET", "/"), upstream: nil, forwardProxy: forward)
        #expect(route == .failure(.noUpstream))
        #expect(ProxyError.noUpstream.status == 502)
    }

    @Test("absolute-form goes to its own origin in origin-form", arguments: [
        ("http://api.local:9000/v1/items?q=1", "api.local", 9000, "/v1/items?q=1"),
        ("http://API.local/", "api.local", 80, "/"),
        ("http://api.local", "api.local", 80, "/"),
        ("http://api.local?x", "api.local", 80, "/?x"),
        ("http://[::1]:8081/p", "::1", 8081, "/p"),
    ])
    func absoluteFormRoutes(target: String, host: String, port: Int, path: String) {
        let route = ProxyRules.route(head("GET", target), upstream: upstream, forwardProxy: forward)
        #expect(route == .success(.origin(Origin(scheme: .http, host: host, port: port), target: path, forwardMode: true)))
    }

    @Test("inside an intercepted tunnel, a request naming the tunnel's authority goes to its https origin", arguments: [
        ("/v1/items", [("Host", "api.example.com")], "/v1/items"),
        ("/v1/items", [("Host", "API.example.com:443")], "/v1/items"),
        ("https://api.example.com/v1?x=1", [("Host", "whatever")], "/v1?x=1"),
        ("*", [("Host", "api.example.com")], "*"),
    ])
    func interceptedTunnelRoutes(target: String, headers: [(String, String)], path: String) {
        let tunnel = Origin(scheme: .https, host: "api.example.com", port: 443)
        let route = ProxyRules.route(head("OPTIONS", target, headers), upstream: upstream, forwardProxy: forward,
                                     intercepted: tunnel)
        #expect(route == .success(.origin(tunnel, target: path, forwardMode: true)))
    }

    @Test("inside an intercepted tunnel, another authority is 421 and CONNECT is refused", arguments: [
        ("GET", "/", [("Host", "other.example.com")], 421),
        ("GET", "/", [("Host", "api.example.com:8443")], 421),
        ("GET", "https://other.example.com/", [("Host", "api.example.com")], 421),
        ("GET", "http://api.example.com/", [("Host", "api.example.com")], 421),
        ("CONNECT", "api.example.com:443", [("Host", "api.example.com:443")], 400),
    ])
    func interceptedTunnelRefusesOtherAuthorities(method: String, target: String, headers: [(String, String)], status: Int) {
        let tunnel = Origin(scheme: .https, host: "api.example.com", port: 443)
        guard case .failure(let error) = ProxyRules.route(head(method, target, headers), upstream: upstream,
                                                          forwardProxy: forward, intercepted: tunnel) else {
            Issue.record("\(method) \(target) was routed")
            return
        }
        #expect(error.status == status)
        if status == 421 { #expect(error.code.rawValue == "misdirected_request") }
    }

    @Test("absolute-form with userinfo, fragments or other schemes is rejected", arguments: [
        "http://user@api.local/", "ftp://api.local/", "http:///x", "http://api.local/#frag", "http://api.local:99999/",
    ])
    func badAbsoluteFormRejected(target: String) {
        guard case .failure(let error) = ProxyRules.route(head("GET", target), upstream: upstream, forwardProxy: forward) else {
            Issue.record("\(target) was accepted")
            return
        }
        #expect(error.status == 400)
    }

    @Test("forward mode refuses hosts outside allowedHosts and when disabled")
    func forwardModeRefusals() {
        var restricted = forward
        restricted.allowedHosts = ["api.local"]
        let denied = ProxyRules.route(head("GET", "http://evil.local/"), upstream: upstream, forwardProxy: restricted)
        #expect((try? denied.get()) == nil)
        if case .failure(let error) = denied { #expect(error.status == 403) }
        var disabled = forward
        disabled.enabled = false
        if case .failure(let error) = ProxyRules.route(head("GET", "http://api.local/"), upstream: upstream, forwardProxy: disabled) {
            #expect(error.status == 403)
        } else {
            Issue.record("disabled forward proxy routed a request")
        }
    }

    @Test("CONNECT: allowed port tunnels, other ports are 403, bad authority is 400")
    func connectRouting() {
        var config = forward
        config.connectPorts = [443, 8443]
        #expect(ProxyRules.route(head("CONNECT", "api.local:8443"), upstream: nil, forwardProxy: config)
                == .success(.tunnel(host: "api.local", port: 8443)))
        if case .failure(let error) = ProxyRules.route(head("CONNECT", "api.local:22"), upstream: nil, forwardProxy: config) {
            #expect(error.status == 403)
        } else {
            Issue.record("CONNECT to port 22 was allowed")
        }
        if case .failure(let error) = ProxyRules.route(head("CONNECT", "api.local"), upstream: nil, forwardProxy: config) {
            #expect(error.status == 400)
        } else {
            Issue.record("CONNECT without a port was allowed")
        }
    }

    @Test("a request that passed through Outbox three times is a loop (508); fewer hops pass")
    func loopDetection() {
        let twice = head("GET", "/", [("Host", "h"), ("Via", "1.1 outbox, 1.0 squid"), ("Via", "1.1 outbox")])
        #expect((try? ProxyRules.route(twice, upstream: upstream, forwardProxy: forward).get()) != nil)
        let thrice = head("GET", "/", [("Host", "h"), ("Via", "1.1 outbox, 1.1 outbox"), ("Via", "1.1 Outbox")])
        #expect(ProxyRules.route(thrice, upstream: upstream, forwardProxy: forward) == .failure(.loopDetected))
        #expect(ProxyError.loopDetected.status == 508)
    }

    @Test("a target refused by the pool answers 508 forwarding_loop (its own listener) or 403 (an internal address)")
    func refusedTargets() {
        let loop = ProxyError.upstream(.targetRefused(.ownListener(address: "127.0.0.1:8080")))
        #expect(loop.status == 508 && loop.code.rawValue == "forwarding_loop" && loop.message.contains("127.0.0.1:8080"))
        #expect(!loop.wantsRetryAfter)
        let internalAddress = ProxyError.upstream(.targetRefused(.internalAddress(address: "169.254.169.254")))
        #expect(internalAddress.status == 403 && internalAddress.code.rawValue == "forbidden")
        #expect(internalAddress.message.contains("allowedHosts"))
        // The Via count keeps its own code.
        #expect(ProxyError.loopDetected.code.rawValue == "loop_detected")
    }

    @Test("the pool may let internal addresses only to exactly named hosts when listen is not loopback")
    func targetPolicyFromConfig() throws {
        var config = OutboxConfig()
        config.forwardProxy.allowedHosts = ["*", "*.internal", "api.local", "::1"]
        config.upstream = UpstreamURL(scheme: .http, host: "Sidecar.Local", port: 9000, basePath: "")
        let everywhere = try #require(SocketAddress.resolveNumeric("0.0.0.0", port: 8080))
        let policy = ProxyContext.targetPolicy(config: config, listeners: [everywhere])
        #expect(policy.internalAddressHosts == ["api.local", "::1"])
        #expect(policy.internalAddressOrigins.map { "\($0.host):\($0.port)" } == ["sidecar.local:9000"])
        #expect(policy.listeners.count == 1)
        let loopback = try #require(SocketAddress.resolveNumeric("127.0.0.1", port: 8080))
        #expect(ProxyContext.targetPolicy(config: config, listeners: [loopback]).internalAddressHosts == nil)
    }

    @Test("asterisk-form is for OPTIONS only")
    func asteriskForm() {
        #expect((try? ProxyRules.route(head("OPTIONS", "*"), upstream: upstream, forwardProxy: forward).get()) != nil)
        if case .failure(let error) = ProxyRules.route(head("GET", "*"), upstream: upstream, forwardProxy: forward) {
            #expect(error.status == 400)
        } else {
            Issue.record("GET * was routed")
        }
    }

    @Test("upstream head: Host first, hop-by-hop and Connection-named headers gone, forwarding headers added, order kept")
    func upstreamHeadRewrite() {
        let client = head("POST", "/v1/items", [
            ("Host", "localhost:8080"),
            ("Connection", "keep-alive, X-Secret-Hop"),
            ("X-Secret-Hop", "1"),
            ("Keep-Alive", "timeout=5"),
            ("Proxy-Authorization", "Basic Zm9v"),
            ("Proxy-Connection", "keep-alive"),
            ("TE", "trailers"),
            ("Trailer", "X-Checksum"),
            ("Upgrade", "websocket"),
            ("Authorization", "Bearer t"),
            ("X-Forwarded-For", "10.0.0.1"),
            ("X-Forwarded-Proto", "https"),
            ("Expect", "100-continue"),
            ("Content-Type", "application/json"),
            ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"),
            ("Content-Length", "2"),
        ])
        let origin = Origin(scheme: .http, host: "127.0.0.1", port: 9000)
        let result = ProxyRules.upstreamRequestHead(client, origin: origin, target: "/api/v1/items",
                                                    clientAddress: "127.0.0.1", bodyFraming: .contentLength(2))
        let fields = result.headers.map { "\($0.name): \($0.value)" }
        #expect(fields == [
            "Host: 127.0.0.1:9000",
            "Authorization: Bearer t",
            "Content-Type: application/json",
            "Set-Cookie: a=1",
            "Set-Cookie: b=2",
            "Content-Length: 2",
            "Via: 1.1 outbox",
            "X-Forwarded-For: 10.0.0.1, 127.0.0.1",
            "X-Forwarded-Proto: http",
            "X-Forwarded-Host: localhost:8080",
        ])
        #expect(result.target == "/api/v1/items")
        #expect(result.version == .http1_1)
    }

    @Test("X-Forwarded-Host: the absolute-form authority in forward mode, the Host field in reverse mode", arguments: [
        ("http://api.local:9000/v1/items", "other.example:8080", "api.local:9000"),
        ("HTTP://API.Local/x?q=1", "api.local", "API.Local"),
        ("http://[::1]:8081/p", "localhost", "[::1]:8081"),
        ("/v1/items", "client.example:8080", "client.example:8080"),
    ])
    func forwardedHostNamesTheAuthorityTheClientAskedFor(target: String, host: String, forwardedHost: String) {
        let client = head("GET", target, [("Host", host), ("X-Forwarded-Host", "spoofed.example")])
        let result = ProxyRules.upstreamRequestHead(client, origin: Origin(scheme: .http, host: "h", port: 80), target: "/",
                                                    clientAddress: "127.0.0.1", bodyFraming: .none)
        #expect(result.headers.values("X-Forwarded-Host") == [forwardedHost])
    }

    @Test("X-Forwarded-Host in forward mode does not need a Host field (HTTP/1.0 clients)")
    func forwardedHostWithoutHostField() {
        let client = head("GET", "http://api.local:9000/", [])
        let result = ProxyRules.upstreamRequestHead(client, origin: Origin(scheme: .http, host: "api.local", port: 9000), target: "/",
                                                    clientAddress: "127.0.0.1", bodyFraming: .none)
        #expect(result.headers.values("X-Forwarded-Host") == ["api.local:9000"])
        let reverse = ProxyRules.upstreamRequestHead(head("GET", "/", []), origin: Origin(scheme: .http, host: "h", port: 80),
                                                     target: "/", clientAddress: "127.0.0.1", bodyFraming: .none)
        #expect(reverse.headers.values("X-Forwarded-Host").isEmpty)
    }

    @Test("Outbox-* control headers are never forwarded")
    func controlHeadersStripped() {
        let client = head("POST", "/x", [("Host", "h"), ("Outbox-Priority", "high"), ("Outbox-Tag", "t"),
                                         ("OUTBOX-DEPENDS-ON", "k"), ("Outbox-Mode", "queue"), ("outbox-ordering-key", "o"),
                                         ("Outbox-Attempt", "9"), ("Outbox-Other", "kept")])
        let result = ProxyRules.upstreamRequestHead(client, origin: Origin(scheme: .http, host: "h", port: 80), target: "/x",
                                                    clientAddress: "127.0.0.1", bodyFraming: .none)
        #expect(result.headers.map(\.name).filter { $0.lowercased().hasPrefix("outbox-") } == ["Outbox-Other"])
    }

    @Test("a chunked request is re-declared chunked for the upstream hop")
    func chunkedRequestRedeclared() {
        let client = head("POST", "/x", [("Host", "h"), ("Transfer-Encoding", "chunked")])
        let result = ProxyRules.upstreamRequestHead(client, origin: Origin(scheme: .http, host: "h", port: 80), target: "/x",
                                                    clientAddress: "::1", bodyFraming: .chunked)
        #expect(result.headers.values("Transfer-Encoding") == ["chunked"])
        #expect(result.headers.first("Host") == "h")
    }

    @Test("response head: hop-by-hop removed, Via added, duplicates kept")
    func responseHeadRewrite() {
        let upstream = HTTPResponseHead(version: .http1_0, status: 200, headers: HTTPHeaders([
            (name: "Connection", value: "close, X-Hop"), (name: "X-Hop", value: "1"),
            (name: "Set-Cookie", value: "a=1"), (name: "Set-Cookie", value: "b=2"),
            (name: "Transfer-Encoding", value: "chunked"), (name: "Keep-Alive", value: "timeout=1"),
        ]))
        let result = ProxyRules.clientResponseHead(upstream, bodyFraming: .untilClose)
        #expect(result.headers.map { "\($0.name): \($0.value)" } == ["Set-Cookie: a=1", "Set-Cookie: b=2", "Via: 1.1 outbox"])
        #expect(result.version == .http1_1)
    }

    /// A request as the client sent it (`Host: h` first), parsed by the real parser.
    private func parsedRequest(_ fields: String, body: String) throws -> (HTTPRequestHead, HTTPBodyFraming) {
        var parser = HTTPRequestParser()
        var index = 0
        let bytes = Array(("POST /x HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n" + body).utf8)
        guard case .head(let head, let framing) = try parser.next(in: bytes, index: &index) else {
            throw HTTPParseError.incompleteMessage
        }
        return (head, framing)
    }

    @Test("identical Content-Length values go upstream as one field, in the place of the first", arguments: [
        ("Content-Length: 5\r\nX-A: 1\r\nContent-Length: 5\r\n", ["Content-Length: 5", "X-A: 1"]),
        ("Content-Length: 5, 5\r\nX-A: 1\r\n", ["Content-Length: 5", "X-A: 1"]),
        ("Content-Length: 5 , 5,5\r\nX-A: 1\r\nContent-Length: 5\r\n", ["Content-Length: 5", "X-A: 1"]),
        ("X-A: 1\r\ncontent-length: 005\r\nContent-Length: 5\r\n", ["X-A: 1", "content-length: 005"]),
        ("Content-Length: 5\r\nX-A: 1\r\n", ["Content-Length: 5", "X-A: 1"]),
        // Content-Length frames this hop's body: naming it in Connection must not strip it.
        ("Connection: content-length\r\nContent-Length: 5, 5\r\nX-A: 1\r\n", ["Content-Length: 5", "X-A: 1"]),
    ])
    func duplicateContentLengthForwardedOnce(_ fields: String, _ expected: [String]) throws {
        let (head, framing) = try parsedRequest(fields, body: "hello")
        #expect(framing == .contentLength(5))
        let result = ProxyRules.upstreamRequestHead(head, origin: Origin(scheme: .http, host: "h", port: 80), target: "/x",
                                                    clientAddress: "127.0.0.1", bodyFraming: framing)
        let kept = result.headers.map { "\($0.name): \($0.value)" }.filter { $0.hasPrefix("X-A") || $0.lowercased().hasPrefix("content-length") }
        #expect(kept == expected, "upstream head:\n\(result.headers)")
    }

    @Test("Content-Length: 0 , 0 goes upstream as Content-Length: 0")
    func zeroListForwardedOnce() throws {
        let (head, framing) = try parsedRequest("Content-Length: 0 , 0\r\n", body: "")
        let result = ProxyRules.upstreamRequestHead(head, origin: Origin(scheme: .http, host: "h", port: 80), target: "/x",
                                                    clientAddress: "127.0.0.1", bodyFraming: framing)
        #expect(result.headers.values("Content-Length") == ["0"])
    }

    @Test("identical Content-Length values from the upstream reach the client as one field", arguments: [
        // (status, fields, framing the parser gave, expected Content-Length values)
        (200, [("Content-Length", "3"), ("Content-Length", "3")], HTTPBodyFraming.contentLength(3), ["3"]),
        (200, [("Content-Length", "3, 3")], .contentLength(3), ["3"]),
        // A response to HEAD, or a 304, is not framed by its length: the values are checked here.
        (200, [("Content-Length", "100"), ("Content-Length", "100, 100")], .none, ["100"]),
        (304, [("Content-Length", "7 , 7")], .none, ["7"]),
        (200, [("Content-Length", "100")], .none, ["100"]),
        (200, [("Content-Length", "100"), ("Content-Length", "101")], .none, []),
        (200, [("Content-Length", "x")], .none, []),
    ])
    func responseContentLengthForwardedOnce(_ status: Int, _ fields: [(String, String)],
                                           _ framing: HTTPBodyFraming, _ expected: [String]) {
        let upstream = HTTPResponseHead(version: .http1_1, status: status,
                                        headers: HTTPHeaders([(name: "X-A", value: "1")] + fields.map { (name: $0.0, value: $0.1) }))
        let result = ProxyRules.clientResponseHead(upstream, bodyFraming: framing)
        #expect(result.headers.values("Content-Length") == expected, "\(status): \(result.headers)")
        #expect(result.headers.first("X-A") == "1")
    }

    @Test("error envelope is JSON with status, code, Retry-After for 503")
    func errorEnvelope() {
        let bytes = ErrorResponse.bytes(for: .upstream(.connectFailed("refused")), close: false, retryAfterSeconds: 2)
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
        #expect(text.contains("Retry-After: 2\r\n"))
        #expect(text.contains("Content-Type: application/json\r\n"))
        #expect(text.hasSuffix(#"{"error":{"code":"upstream_unavailable","message":"upstream unreachable (connect failed: refused)"}}"# + "\n"))
        let forbidden = String(decoding: ErrorResponse.bytes(for: .forbidden("say \"no\""), close: true, retryAfterSeconds: 2), as: UTF8.self)
        #expect(forbidden.contains("Connection: close\r\n"))
        #expect(!forbidden.contains("Retry-After"))
        #expect(forbidden.contains(#""message":"say \"no\"""#))
    }
}

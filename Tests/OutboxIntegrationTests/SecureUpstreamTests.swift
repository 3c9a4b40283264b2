import OutboxModel
import Testing

/// `https://` upstreams, on the same path as `http://` ones: the real binary with `--upstream
/// https://127.0.0.1:PORT` against a `TestUpstream` behind a TLS front (`tls_front.py`) whose
/// certificate is signed by the loopback-only test CA, which the proxy trusts through
/// `tls.caFile`. Nothing is installed in the system trust store.
@Suite("HTTPS upstream", .harnessThreads)
struct SecureUpstreamTests {
    @Test func getThroughHttpsUpstreamReturnsTheOriginsAnswerWithVia() async throws {
        let origin = try await ProxiedOrigin.start { _ in .respond(.text("secure hello")) }
        let response = try origin.outbox.exchange("GET /hello HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(response.status == 200, "\(response)\n\(origin.diagnostics)")
        #expect(response.bodyText == "secure hello")
        #expect(response.headers.values("Via") == ["1.1 outbox"], "\(response)")
        let request = try #require(try await origin.backend.waitForRequests(1).first)
        #expect(request.method == "GET" && request.target == "/hello", "\(request)")
        #expect(request.headers.values("Host") == [origin.authority], "\(request.headers)")
    }

    /// ALPN offers only `http/1.1` (the front prefers `h2`, so picking `http/1.1` means the
    /// proxy did not offer h2), and no SNI is sent for an IP address (RFC 6066 §3 allows host
    /// names only).
    @Test func handshakeOffersOnlyHTTP11AndNoServerNameForAnAddress() async throws {
        let origin = try await ProxiedOrigin.start()
        let response = try origin.outbox.exchange("GET /alpn HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(response.status == 200, "\(response)\n\(origin.diagnostics)")
        let front = try #require(origin.front)
        let handshake = try #require(try await front.waitForConnections(1).first, "\(front)")
        #expect(handshake.alpn == "http/1.1", "\(front)")
        #expect(handshake.serverName == nil, "\(front)")
    }

    /// For a host name, SNI names it and the certificate is checked against that name (the
    /// fixture's `DNS:localhost`); the front also listens on [::1], wherever `localhost` resolves.
    @Test func handshakeSendsTheHostNameBySNI() async throws {
        let backend = try TestUpstream()
        let front = try await TLSFront.start(relayingTo: backend, ipv6Loopback: true)
        let outbox = try await OutboxProcess.start(upstream: "https://localhost:\(front.port)", config: TLSFixtures.config())
        let response = try outbox.exchange("GET /sni HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(response.status == 200, "\(response)\n\(outbox)\n\(front)")
        let handshake = try #require(try await front.waitForConnections(1).first, "\(front)")
        #expect(handshake.serverName == "localhost", "\(front)")
        let received = try await backend.waitForRequests(1)
        #expect(received.first?.headers.values("Host") == ["localhost:\(front.port)"], "\(received)")
    }

    @Test func postBodyAndCustomHeaderArriveAtHttpsOrigin() async throws {
        let origin = try await ProxiedOrigin.start { _ in .respond(.text("created", status: 201)) }
        // Every byte value, so a text conversion anywhere on the way would show.
        let payload = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ $0 >> 9) }
        let client = try origin.outbox.connect()
        try client.send(Array(("POST /echo HTTP/1.1\r\nHost: h\r\nX-Outbox-Test: value 42\r\n"
            + "Content-Type: application/octet-stream\r\nContent-Length: \(payload.count)\r\n\r\n").utf8) + payload)
        let response = try client.readResponse(to: "POST", timeout: .seconds(20))
        #expect(response.status == 201, "\(response)\n\(origin.diagnostics)")

        let request = try #require(try await origin.backend.waitForRequests(1).first)
        #expect(request.method == "POST" && request.target == "/echo")
        #expect(request.headers.values("X-Outbox-Test") == ["value 42"], "origin got:\n\(request.headers)")
        #expect(request.headers.values("Host") == [origin.authority], "origin got:\n\(request.headers)")
        #expect(request.headers.values("Via") == ["1.1 outbox"], "origin got:\n\(request.headers)")
        #expect(request.bodyFraming == .contentLength(payload.count))
        #expect(SHA256.hex(of: request.body) == SHA256.hex(of: payload), "the body changed on the way")
    }

    @Test func redirectIsPassedToTheClientNotFollowed() async throws {
        let origin = try await ProxiedOrigin.start { request in
            request.target == "/redirect"
                ? .respond(.text("see /hello", status: 302, headers: [HeaderField("Location", "/hello")]))
                : .respond(.text("followed"))
        }
        let response = try origin.outbox.exchange("GET /redirect HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(response.status == 302, "\(response)\n\(origin.diagnostics)")
        #expect(response.headers.values("Location") == ["/hello"], "\(response)")
        #expect(response.bodyText == "see /hello")
        // A followed redirect would have reached the origin before the response came back.
        #expect(origin.backend.requests.map(\.target) == ["/redirect"], "\(origin.diagnostics)")
    }

    @Test func setCookieReachesTheClientAndIsNeverSentBackByTheProxy() async throws {
        let origin = try await ProxiedOrigin.start { request in
            if request.target == "/set-cookie" {
                return .respond(.text("cookie set", headers: [HeaderField("Set-Cookie", "s=1")]))
            }
            return .respond(.text(request.headers["Cookie"] ?? "none"))
        }
        let client = try origin.outbox.connect()
        try client.send("GET /set-cookie HTTP/1.1\r\nHost: h\r\n\r\n")
        let setCookie = try client.readResponse(timeout: .seconds(20))
        #expect(setCookie.status == 200, "\(setCookie)\n\(origin.diagnostics)")
        #expect(setCookie.headers.values("Set-Cookie") == ["s=1"], "\(setCookie)")

        // Same client connection, then a new one: a cookie jar in the proxy would show in either.
        try client.send("GET /cookie HTTP/1.1\r\nHost: h\r\n\r\n")
        let sameConnection = try client.readResponse(timeout: .seconds(20))
        #expect(sameConnection.status == 200, "\(sameConnection)\n\(origin.diagnostics)")
        #expect(sameConnection.bodyText == "none", "the proxy sent a cookie it stored")
        let newConnection = try origin.outbox.exchange("GET /cookie HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(newConnection.bodyText == "none", "the proxy sent a cookie it stored")

        // The client's own cookies are the client's business: they pass through.
        let own = try origin.outbox.exchange("GET /cookie HTTP/1.1\r\nHost: h\r\nCookie: c=2\r\n\r\n", timeout: .seconds(20))
        #expect(own.status == 200, "\(own)\n\(origin.diagnostics)")
        #expect(own.bodyText == "c=2")
    }

    @Test func httpsOriginNotListeningGivesServiceUnavailableWithRetryAfter() async throws {
        let dead = try LocalPort.refusing()
        let outbox = try await OutboxProcess.start(upstream: "https://127.0.0.1:\(dead.port)", config: TLSFixtures.config())
        let response = try outbox.exchange("GET /hello HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        expectErrorResponse(response, status: 503, from: outbox)
        let retryAfter = try #require(response.headers["Retry-After"], "503 without Retry-After\n\(response)")
        #expect(UInt(retryAfter) != nil || retryAfter.hasSuffix("GMT"), "Retry-After: \(retryAfter)")
    }

    /// `tls.verify: false` is loud: a `warn` line at start and `"tlsVerify": false` in the
    /// status, so nobody runs without verification unknowingly.
    @Test func verifyOffIsLoggedAtStartAndShownInTheStatus() async throws {
        let origin = try await ProxiedOrigin.start(presenting: [.untrusted], tls: #""verify": false"#)
        try await origin.outbox.waitForLog(containing: "tls_verify_disabled")
        let line = origin.outbox.stderrText.split(separator: "\n").first { $0.contains("tls_verify_disabled") }
        #expect(line.map(logLevel) == "warn", "\(origin.outbox)")
        let status = try JSONObject(origin.outbox.admin("status"))
        #expect(status.bool("tlsVerify") == false, "\(status)")
    }
}

/// The level of an Outbox log line (`2026-11-29T16:10:26.123Z warn event key=value`).
func logLevel(_ line: Substring) -> String {
    let words = line.split(separator: " ", maxSplits: 2)
    return words.count > 1 ? String(words[1]) : ""
}

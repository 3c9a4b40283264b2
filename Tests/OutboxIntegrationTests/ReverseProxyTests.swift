import Testing

/// Reverse mode: origin-form requests go to the configured upstream, byte for byte
/// except for the hop-by-hop headers and the forwarding headers the proxy owns.
@Suite("Reverse proxy mode", .harnessThreads)
struct ReverseProxyTests {
    /// Headers whose value or position the proxy decides; everything else must pass unchanged.
    static let proxyOwnedHeaders: Set<String> = ["Host", "Via", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Connection"]

    @Test func postIsForwardedUnchangedExceptHopByHopAndForwardingHeaders() async throws {
        let upstream = try TestUpstream { _ in
            .respond(UpstreamResponse(status: 201, headers: [
                HeaderField("X-Resp", "a"),
                HeaderField("Connection", "X-Upstream-Private"),
                HeaderField("X-Upstream-Private", "secret"),
                HeaderField("Keep-Alive", "timeout=5"),
                HeaderField("Set-Cookie", "a=1"),
                HeaderField("Set-Cookie", "b=2"),
            ], body: .bytes(Array("created".utf8))))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL + "/base")
        let client = try outbox.connect()
        try client.send(
            "POST /v1/items?x=1&y=two HTTP/1.1\r\n"
                + "Host: client.example:8080\r\n"
                + "User-Agent: itest/1.0\r\n"
                + "Accept: application/json\r\n"
                + "X-Custom: one\r\n"
                + "Connection: keep-alive, X-Drop-Me\r\n"
                + "X-Drop-Me: secret\r\n"
                + "Keep-Alive: timeout=5\r\n"
                + "Proxy-Connection: keep-alive\r\n"
                + "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
                + "TE: trailers\r\n"
                + "Trailer: X-Checksum\r\n"
                + "Upgrade: h2c\r\n"
                + "X-Forwarded-For: 203.0.113.7\r\n"
                + "X-Custom: two\r\n"
                + "Content-Type: text/plain; charset=utf-8\r\n"
                // The client's own key: a queueing proxy forwards it as is instead of adding one.
                + "Idempotency-Key: itest-key-1\r\n"
                + "Content-Length: 11\r\n"
                + "\r\n"
                + "hello world")
        let response = try client.readResponse()
        #expect(response.status == 201, "\(response)\n\(outbox)")
        #expect(response.bodyText == "created")

        let request = try #require(try await upstream.waitForRequests(1).first)
        #expect(request.method == "POST")
        #expect(request.target == "/base/v1/items?x=1&y=two")
        #expect(request.version == "HTTP/1.1")
        #expect(request.bodyText == "hello world")
        #expect(request.headers.removing(Self.proxyOwnedHeaders) == [
            HeaderField("User-Agent", "itest/1.0"),
            HeaderField("Accept", "application/json"),
            HeaderField("X-Custom", "one"),
            HeaderField("X-Custom", "two"),
            HeaderField("Content-Type", "text/plain; charset=utf-8"),
            HeaderField("Idempotency-Key", "itest-key-1"),
            HeaderField("Content-Length", "11"),
        ], "upstream got:\n\(request.headers)\n\(outbox)")
        #expect(request.headers.values("Host") == [upstream.authority])
        #expect(request.headers.values("Via") == ["1.1 outbox"])
        #expect(request.headers.values("X-Forwarded-For") == ["203.0.113.7, 127.0.0.1"])
        #expect(request.headers.values("X-Forwarded-Proto") == ["http"])
        #expect(request.headers.values("X-Forwarded-Host") == ["client.example:8080"])
        // The proxy may manage its own hop with a Connection header, but never pass the client's.
        #expect(request.headers.tokens("Connection").allSatisfy { ["keep-alive", "close"].contains($0) },
                "\(request.headers)")

        #expect(response.headers.values("Via") == ["1.1 outbox"], "\(response)")
        #expect(response.headers.values("X-Resp") == ["a"])
        #expect(response.headers.values("Set-Cookie") == ["a=1", "b=2"])
        #expect(!response.headers.contains("X-Upstream-Private"), "\(response)")
        #expect(!response.headers.contains("Keep-Alive"), "\(response)")
        #expect(!response.headers.tokens("Connection").contains("x-upstream-private"))
    }

    @Test func getTargetIsForwardedWithoutNormalisation() async throws {
        let upstream = try TestUpstream { request in .respond(.text("target \(request.target)")) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL + "/base")
        let response = try outbox.exchange(
            "GET /search/a%2Fb/../c?q=a%20b&empty=&x=%2F&q=2 HTTP/1.1\r\n"
                + "Host: 127.0.0.1:\(outbox.port)\r\n"
                + "Accept: text/html\r\n"
                + "Cookie: a=1; b=2\r\n"
                + "If-None-Match: \"v1\"\r\n"
                + "\r\n")
        #expect(response.status == 200, "\(response)\n\(outbox)")
        let request = try #require(try await upstream.waitForRequests(1).first)
        #expect(request.method == "GET")
        #expect(request.target == "/base/search/a%2Fb/../c?q=a%20b&empty=&x=%2F&q=2")
        #expect(request.body.isEmpty)
        #expect(request.bodyFraming == .none || request.bodyFraming == .contentLength(0))
        #expect(request.headers.removing(Self.proxyOwnedHeaders.union(["Content-Length"])) == [
            HeaderField("Accept", "text/html"),
            HeaderField("Cookie", "a=1; b=2"),
            HeaderField("If-None-Match", "\"v1\""),
        ], "upstream got:\n\(request.headers)")
        #expect(request.headers.values("Host") == [upstream.authority])
        #expect(request.headers.values("X-Forwarded-For") == ["127.0.0.1"])
        #expect(request.headers.values("X-Forwarded-Host") == ["127.0.0.1:\(outbox.port)"])
        #expect(request.headers.values("X-Forwarded-Proto") == ["http"])
        #expect(request.headers.values("Via") == ["1.1 outbox"])
    }

    @Test func upstreamWithoutBasePathGetsTheRequestTargetAsIs() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let response = try outbox.exchange("DELETE /v1/items/7?hard=true HTTP/1.1\r\nHost: h\r\nIdempotency-Key: k7\r\n\r\n")
        #expect(response.status == 200, "\(response)\n\(outbox)")
        let request = try #require(try await upstream.waitForRequests(1).first)
        #expect(request.method == "DELETE")
        #expect(request.target == "/v1/items/7?hard=true")
    }
}

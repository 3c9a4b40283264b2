import Testing

/// Forward mode: absolute-form requests (what clients send with HTTP_PROXY) go to the
/// named origin if `forwardProxy.allowedHosts` allows it, as origin-form requests.
@Suite("Forward proxy mode", .harnessThreads)
struct ForwardProxyTests {
    @Test func absoluteFormGoesToTheNamedOriginWithOriginFormTarget() async throws {
        let configuredUpstream = try TestUpstream()
        let origin = try TestUpstream { request in .respond(.text("origin saw \(request.target)")) }
        let outbox = try await OutboxProcess.start(upstream: configuredUpstream.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["127.0.0.1"], "connectPorts": [443]}}
            """)
        let client = try outbox.connect()
        try client.send(
            "GET http://\(origin.authority)/fwd/path?q=1 HTTP/1.1\r\n"
                + "Host: \(origin.authority)\r\n"
                + "User-Agent: itest\r\n"
                + "Proxy-Connection: keep-alive\r\n"
                + "Proxy-Authorization: Basic eDp5\r\n"
                + "X-A: 1\r\n"
                + "\r\n")
        let response = try client.readResponse()
        #expect(response.status == 200, "\(response)\n\(outbox)")
        #expect(response.bodyText == "origin saw /fwd/path?q=1")
        #expect(response.headers.values("Via") == ["1.1 outbox"])

        let request = try #require(try await origin.waitForRequests(1).first)
        #expect(request.method == "GET")
        #expect(request.target == "/fwd/path?q=1")
        #expect(request.headers.values("Host") == [origin.authority])
        #expect(request.headers.removing(ReverseProxyTests.proxyOwnedHeaders.union(["Content-Length"])) == [
            HeaderField("User-Agent", "itest"),
            HeaderField("X-A", "1"),
        ], "origin got:\n\(request.headers)")
        #expect(request.headers.values("Via") == ["1.1 outbox"])
        #expect(request.headers.values("X-Forwarded-For") == ["127.0.0.1"])
        #expect(request.headers.values("X-Forwarded-Proto") == ["http"])
        #expect(request.headers.values("X-Forwarded-Host") == [origin.authority])

        // The same client connection can go on to another origin.
        let second = try TestUpstream { _ in .respond(.text("second origin")) }
        try client.send("POST http://\(second.authority)/items HTTP/1.1\r\nHost: \(second.authority)\r\n"
            + "Idempotency-Key: fwd-1\r\nContent-Length: 4\r\n\r\nbody")
        let secondResponse = try client.readResponse()
        #expect(secondResponse.bodyText == "second origin", "\(secondResponse)\n\(outbox)")
        let secondRequest = try #require(try await second.waitForRequests(1).first)
        #expect(secondRequest.target == "/items")
        #expect(secondRequest.bodyText == "body")
        #expect(configuredUpstream.receivedByteCount == 0)
    }

    @Test func forwardedHostIsTheAbsoluteFormAuthorityWhenTheHostFieldDiffers() async throws {
        let configuredUpstream = try TestUpstream()
        let origin = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: configuredUpstream.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["127.0.0.1"], "connectPorts": [443]}}
            """)
        // The client addresses the origin by its numeric authority but names another host in
        // Host (a stale or hand-written field): the request goes where the target says.
        let response = try outbox.exchange(
            "GET http://\(origin.authority)/where HTTP/1.1\r\nHost: elsewhere.example:8443\r\n\r\n")
        #expect(response.status == 200, "\(response)\n\(outbox)")

        let request = try #require(try await origin.waitForRequests(1).first)
        #expect(request.headers.values("X-Forwarded-Host") == [origin.authority], "origin got:\n\(request.headers)")
        #expect(request.headers.values("Host") == [origin.authority])
        #expect(configuredUpstream.receivedByteCount == 0)
    }

    @Test func hostOutsideAllowedHostsIsForbidden() async throws {
        let configuredUpstream = try TestUpstream()
        let origin = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: configuredUpstream.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["allowed.example", "*.allowed.example"], "connectPorts": [443]}}
            """)
        let response = try outbox.exchange("GET http://\(origin.authority)/x HTTP/1.1\r\nHost: \(origin.authority)\r\n\r\n")
        expectErrorResponse(response, status: 403, from: outbox)
        #expect(origin.acceptedConnectionCount == 0)
        #expect(configuredUpstream.receivedByteCount == 0)
    }

    @Test func absoluteFormIsForbiddenWhenForwardProxyIsDisabled() async throws {
        let configuredUpstream = try TestUpstream()
        let origin = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: configuredUpstream.baseURL, config: """
            {"forwardProxy": {"enabled": false, "allowedHosts": ["*"], "connectPorts": [443]}}
            """)
        let response = try outbox.exchange("GET http://\(origin.authority)/x HTTP/1.1\r\nHost: \(origin.authority)\r\n\r\n")
        expectErrorResponse(response, status: 403, from: outbox)
        #expect(origin.acceptedConnectionCount == 0)
        #expect(configuredUpstream.receivedByteCount == 0)
    }

    @Test func upstreamPointingAtTheProxyItselfEndsAsLoopDetected() async throws {
        // A misconfiguration, not an attack: upstream = the proxy's own address.
        let port = try LocalPort.unused()
        let outbox = try await OutboxProcess.start(
            upstream: "http://127.0.0.1:\(port)", arguments: ["--listen", "127.0.0.1:\(port)"])
        let response = try outbox.exchange("GET /self HTTP/1.1\r\nHost: h\r\n\r\n")
        expectErrorResponse(response, status: 508, from: outbox)
    }
}

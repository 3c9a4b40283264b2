import Testing

/// HTTP/1.0 clients and responses that carry no body by rule (HEAD, 204, 304): framing
/// mistakes here hang or corrupt the next response on the connection.
@Suite("HTTP/1.0 clients and bodiless responses", .harnessThreads)
struct HTTP10AndBodylessResponseTests {
    @Test func http10ClientGetsAnUnchunkedBodyAndTheConnectionCloses() async throws {
        let body = String(repeating: "ten-body ", count: 500)
        let upstream = try TestUpstream { _ in .respond(.text(body, framing: .chunked(chunkSize: 1000))) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        try client.send("GET /ten HTTP/1.0\r\nHost: h\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 200, "\(response)\n\(outbox)")
        #expect(response.version == "HTTP/1.1" || response.version == "HTTP/1.0")
        // An HTTP/1.0 client cannot decode chunked (RFC 9112 §6.1).
        #expect(response.framing != .chunked, "\(response)")
        #expect(response.bodyText == body)
        #expect(client.waitForClose(), "HTTP/1.0 connection without keep-alive stayed open\n\(outbox)")
    }

    @Test func http10ClientWithKeepAliveCanSendASecondRequest() async throws {
        let upstream = try TestUpstream { request in .respond(.text("answer for \(request.target)")) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        for target in ["/k1", "/k2"] {
            try client.send("GET \(target) HTTP/1.0\r\nHost: h\r\nConnection: keep-alive\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200, "\(response)\n\(outbox)")
            #expect(response.bodyText == "answer for \(target)")
            #expect(response.framing == .contentLength(response.body.count), "keep-alive needs a length: \(response)")
        }
    }

    @Test func headResponseKeepsItsHeadersAndRelaysNoBody() async throws {
        let upstream = try TestUpstream { request in
            .respond(.text(request.target == "/h" ? String(repeating: "x", count: 1234) : "after head"))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        try client.send("HEAD /h HTTP/1.1\r\nHost: h\r\n\r\n")
        let head = try client.readResponse(to: "HEAD")
        #expect(head.status == 200, "\(head)\n\(outbox)")
        #expect(head.headers["Content-Length"] == "1234", "\(head)")
        // The next response on the connection parses only if no body bytes followed the head.
        try client.send("GET /after HTTP/1.1\r\nHost: h\r\n\r\n")
        let after = try client.readResponse()
        #expect(after.bodyText == "after head", "\(after)\n\(outbox)")
        let requests = try await upstream.waitForRequests(2)
        #expect(requests.map(\.method) == ["HEAD", "GET"])
    }

    @Test func noContentAndNotModifiedResponsesCarryNoBody() async throws {
        let upstream = try TestUpstream { request in
            switch request.target {
            case "/nc": .respond(UpstreamResponse(status: 204, headers: [HeaderField("X-Deleted", "yes")]))
            case "/nm": .respond(UpstreamResponse(status: 304, headers: [HeaderField("ETag", "\"v1\"")]))
            default: .respond(.text("final"))
            }
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        try client.send("GET /nc HTTP/1.1\r\nHost: h\r\n\r\n")
        let noContent = try client.readResponse()
        #expect(noContent.status == 204, "\(noContent)\n\(outbox)")
        #expect(noContent.headers["X-Deleted"] == "yes")
        #expect(!noContent.headers.contains("Transfer-Encoding"), "\(noContent)")

        try client.send("GET /nm HTTP/1.1\r\nHost: h\r\nIf-None-Match: \"v1\"\r\n\r\n")
        let notModified = try client.readResponse()
        #expect(notModified.status == 304, "\(notModified)\n\(outbox)")
        #expect(notModified.headers["ETag"] == "\"v1\"")
        #expect(!notModified.headers.contains("Transfer-Encoding"), "\(notModified)")

        try client.send("GET /final HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(try client.readResponse().bodyText == "final", "\(outbox)")
    }
}

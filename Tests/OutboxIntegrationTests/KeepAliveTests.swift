import Testing

/// Keep-alive and pipelining on the client side, connection reuse on the upstream side.
@Suite("Keep-alive and pipelining", .harnessThreads)
struct KeepAliveTests {
    @Test func fiftySequentialRequestsShareOneClientConnection() async throws {
        let upstream = try TestUpstream { request in
            .respond(.text("response to \(request.target)" + String(repeating: "!", count: request.index % 7)))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        for index in 0..<50 {
            try client.send("GET /ka/\(index) HTTP/1.1\r\nHost: h\r\n\r\n")
            let response = try client.readResponse()
            try #require(response.status == 200, "request \(index): \(response)\n\(outbox)")
            #expect(response.bodyText == "response to /ka/\(index)" + String(repeating: "!", count: index % 7))
            #expect(!response.announcesClose, "request \(index) closed the connection: \(response)")
        }
        let requests = try await upstream.waitForRequests(50)
        #expect(requests.map(\.target) == (0..<50).map { "/ka/\($0)" })
        // Sequential requests let the proxy reuse its upstream connection; one spare is allowed
        // for a connection that went back to the pool just after its response reached us.
        #expect(upstream.acceptedConnectionCount <= 2, "upstream connections: \(upstream.acceptedConnectionCount)")
    }

    @Test func threePipelinedRequestsAreAnsweredInOrder() async throws {
        let firstHeld = Gate()
        let bodies = ["/p/1": "first", "/p/2": "second response", "/p/3": "third, and the longest of the three"]
        let upstream = try TestUpstream { request in
            let response = UpstreamAction.respond(.text(bodies[request.target] ?? "unknown"))
            // Holding the first answer makes a proxy that runs pipelined requests in parallel
            // receive the later answers first; it must still reply in request order.
            return request.target == "/p/1" ? .hold(until: firstHeld, then: response) : response
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        try client.send("GET /p/1 HTTP/1.1\r\nHost: h\r\n\r\n"
            + "GET /p/2 HTTP/1.1\r\nHost: h\r\n\r\n"
            + "GET /p/3 HTTP/1.1\r\nHost: h\r\n\r\n")
        try await upstream.waitForRequests(1)
        firstHeld.open()
        for target in ["/p/1", "/p/2", "/p/3"] {
            let response = try client.readResponse()
            #expect(response.status == 200, "\(target): \(response)\n\(outbox)")
            #expect(response.bodyText == bodies[target], "\(target)\n\(outbox)")
        }
        let requests = try await upstream.waitForRequests(3)
        #expect(Set(requests.map(\.target)) == ["/p/1", "/p/2", "/p/3"])
    }
}

import Glibc
import Testing

/// Connection limits and reuse: idle and header timeouts, `limits.maxConnections`, the upstream
/// keep-alive pool and what happens when the origin closes a pooled connection under us.
@Suite("Connection management", .harnessThreads)
struct ConnectionManagementTests {
    @Test func idleKeepAliveConnectionIsClosedAfterIdleTimeout() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"limits": {"idleTimeoutSeconds": 0.3}}
            """)
        let client = try outbox.connect()
        try client.send("GET /once HTTP/1.1\r\nHost: h\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 200, "\(response)\n\(outbox)")
        #expect(!response.announcesClose)
        #expect(client.waitForClose(timeout: .seconds(5)), "an idle connection outlived idleTimeoutSeconds\n\(outbox)")
    }

    @Test func silentNewConnectionIsClosedAfterHeaderTimeoutWithoutAnAnswer() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"limits": {"headerTimeoutSeconds": 0.3}}
            """)
        let client = try outbox.connect()
        let bytes = try client.readUntilEOF(timeout: .seconds(5))
        // Nothing was asked, so nothing is answered: a pre-connected browser socket gets no junk.
        #expect(bytes.isEmpty, "\(String(decoding: bytes, as: UTF8.self))")
        #expect(upstream.requests.isEmpty)
    }

    @Test func connectionsBeyondMaxConnectionsAreRefusedWithA503() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"limits": {"maxConnections": 2}}
            """)
        // Two connections that have each been served are surely counted.
        let first = try outbox.connect()
        let second = try outbox.connect()
        for client in [first, second] {
            try client.send("GET /hold HTTP/1.1\r\nHost: h\r\n\r\n")
            #expect(try client.readResponse().status == 200)
        }
        let third = try outbox.connect()
        let refused = try third.readResponse()
        expectErrorResponse(refused, status: 503, from: outbox)
        #expect(third.waitForClose(timeout: .seconds(5)))

        // Freeing a slot lets a new client in.
        first.close()
        let deadline = Deadline(after: .seconds(5))
        var served = false
        while !served {
            let expired = deadline.hasPassed   // one more try after the deadline
            let next = try outbox.connect()
            try next.send("GET /again HTTP/1.1\r\nHost: h\r\n\r\n")
            served = try next.readResponse().status == 200
            if expired { break }
        }
        #expect(served, "no connection was served after one closed\n\(outbox)")
    }

    @Test func upstreamConnectionsArePooledAcrossClientConnections() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        for index in 0..<20 {
            let response = try outbox.exchange("GET /client/\(index) HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            try #require(response.status == 200, "\(response)\n\(outbox)")
        }
        _ = try await upstream.waitForRequests(20)
        // One pool per event loop, and one loop per core: at most that many origin connections.
        let cores = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        #expect(upstream.acceptedConnectionCount <= cores, "opened \(upstream.acceptedConnectionCount) upstream connections for 20 sequential requests")
    }

    /// The origin closes a kept-alive connection just as the proxy reuses it; the request on it
    /// was never answered, so an idempotent one is sent again on a fresh connection. A
    /// queueable POST always carries an idempotency key upstream (Outbox adds one), so it is
    /// safe to repeat too; LOCK (neither idempotent nor queueable) is not.
    @Test(arguments: [
        ("GET", "", true),
        ("POST", "Idempotency-Key: k-1\r\nContent-Length: 2\r\n", true),
        ("POST", "Content-Length: 2\r\n", true),
        ("LOCK", "Content-Length: 2\r\n", false),
    ])
    func requestOnAStalePooledConnection(method: String, extraHeaders: String, retried: Bool) async throws {
        let upstream = try TestUpstream { request in
            request.index == 1 ? .closeWithoutAnswer : .respond(.text("answer \(request.index)"))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        try client.send("GET /warm HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(try client.readResponse().bodyText == "answer 0")
        let body = method == "GET" ? "" : "hi"
        try client.send("\(method) /stale HTTP/1.1\r\nHost: h\r\n\(extraHeaders)\r\n\(body)")
        let response = try client.readResponse(to: method)
        let requests = upstream.requests
        try #require(requests.count >= 2, "\(requests.count) requests\n\(outbox)")
        try #require(requests[1].connectionID == requests[0].connectionID, "the pooled connection was not reused")
        if retried {
            #expect(response.status == 200, "\(response)\n\(outbox)")
            #expect(response.bodyText == "answer 2")
            #expect(try await upstream.waitForRequests(3).last?.body == Array(body.utf8))
        } else {
            // Not safe to repeat: the origin may have acted on it; a drop before the head is a 503.
            expectErrorResponse(response, status: 503, from: outbox)
            #expect(upstream.requests.count == 2, "a non-idempotent request without an idempotency key was sent twice")
        }
    }

    @Test func clientThatStopsSendingItsBodyIsCutAfterIdleTimeout() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"limits": {"idleTimeoutSeconds": 0.4}}
            """)
        let client = try outbox.connect()
        try client.send("POST /slow-upload HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\nonly ten b")
        #expect(client.waitForClose(timeout: .seconds(5)), "a stalled upload held its connection\n\(outbox)")
        try await outbox.waitForLog(containing: "client_stalled")
    }

    @Test func clientThatStopsReadingIsCutAfterIdleTimeout() async throws {
        let generated = GeneratedBody(count: 32 << 20, seed: 9)
        let upstream = try TestUpstream { _ in .respond(UpstreamResponse(body: .generated(generated))) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"limits": {"idleTimeoutSeconds": 0.4}}
            """)
        let client = try outbox.connect()
        try client.send("GET /never-read HTTP/1.1\r\nHost: h\r\n\r\n")
        // Never reading fills the socket buffers; the proxy must give up on us, not wait forever.
        try await outbox.waitForLog(containing: "client_stalled")
        let peak = try outbox.peakRSSBytes()
        #expect(peak < 100_000_000, "the unread response was buffered: peak RSS \(peak / 1_000_000) MB")
        // Cut means closed: reading now gives what was already in the sockets' buffers, then the
        // end (readUntilEOF throws if the connection stays open), well short of the whole body.
        var received = 0
        do {
            received = try client.readUntilEOF(timeout: .seconds(20)).count
        } catch SocketError.reset {
            // Closed with unread data on its side: a reset is as closed as an end.
        }
        #expect(received < generated.count, "the whole \(generated.count)-byte response arrived: the connection was never cut")
    }
}

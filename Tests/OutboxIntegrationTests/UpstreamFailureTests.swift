import Testing

/// What a client sees when the upstream fails for a non-queueable request: 503 with
/// Retry-After when it is unreachable (refused, or the connection drops before a
/// complete response head), 502 when it answers garbage, 504 when it never answers within
/// `reachability.responseTimeoutSeconds` (a gateway timeout, RFC 9110 §15.6.5, though for the
/// queue that origin is unreachable too).
@Suite("Upstream failures", .harnessThreads)
struct UpstreamFailureTests {
    @Test func refusedConnectionGivesServiceUnavailableWithRetryAfter() async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let response = try outbox.exchange("GET /down HTTP/1.1\r\nHost: h\r\n\r\n")
        expectErrorResponse(response, status: 503, from: outbox)
        let retryAfter = try #require(response.headers["Retry-After"], "503 without Retry-After\n\(response)")
        // delay-seconds or an HTTP-date (RFC 9110 §10.2.3)
        #expect(UInt(retryAfter) != nil || retryAfter.hasSuffix("GMT"), "Retry-After: \(retryAfter)")
    }

    @Test func garbageFromTheUpstreamGivesBadGateway() async throws {
        let upstream = try TestUpstream { _ in .sendRawThenClose(Array("this is not HTTP at all\r\n\r\n".utf8)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let response = try outbox.exchange("GET /garbage HTTP/1.1\r\nHost: h\r\n\r\n")
        expectErrorResponse(response, status: 502, from: outbox)
        #expect(upstream.requests.count >= 1)
    }

    @Test func headBrokenOffMidwayMeansUnreachable() async throws {
        let upstream = try TestUpstream { _ in .sendRawThenClose(Array("HTTP/1.1 200 OK\r\nContent-Le".utf8)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let response = try outbox.exchange("GET /partial HTTP/1.1\r\nHost: h\r\n\r\n")
        expectErrorResponse(response, status: 503, from: outbox)
        #expect(response.headers["Retry-After"] != nil, "503 without Retry-After\n\(response)")
    }

    @Test func connectionClosedWithoutAnswerMeansUnreachable() async throws {
        let upstream = try TestUpstream { _ in .closeWithoutAnswer }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let response = try outbox.exchange("GET /dropped HTTP/1.1\r\nHost: h\r\n\r\n")
        expectErrorResponse(response, status: 503, from: outbox)
        #expect(upstream.requests.count == 1, "a fresh connection is not retried: \(upstream.requests.count) attempts")
    }

    @Test func headThenCloseMidBodyCutsTheClientConnection() async throws {
        let upstream = try TestUpstream { _ in .sendHeadThenClose(.text(String(repeating: "x", count: 5000))) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        try client.send("GET /short HTTP/1.1\r\nHost: h\r\n\r\n")
        // The 200 head is already relayed; the only honest signal left is closing early.
        let bytes = try client.readUntilEOF()
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200"), "\(text)\n\(outbox)")
        #expect(bytes.count < 5000, "a truncated body was passed off as complete\n\(outbox)")
    }

    @Test func silentUpstreamGivesGatewayTimeoutAfterResponseTimeout() async throws {
        let never = Gate()
        let upstream = try TestUpstream { _ in .hold(until: never, then: .respond(.text("too late"))) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"reachability": {"responseTimeoutSeconds": 0.5}}
            """)
        let started = ContinuousClock.now
        let response = try outbox.exchange("GET /silent HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(10))
        let elapsed = ContinuousClock.now - started
        expectErrorResponse(response, status: 504, from: outbox)
        #expect(elapsed >= .milliseconds(450), "504 after \(elapsed), before responseTimeoutSeconds (0.5 s)")
        #expect(elapsed < .seconds(5), "504 only after \(elapsed)")
    }
}

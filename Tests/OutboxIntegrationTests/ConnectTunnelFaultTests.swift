import Testing

/// Fault rules and `CONNECT` tunnels (`HTTPS_PROXY` without interception): the bytes inside are
/// opaque, so a rule for the target's `https://` origin acts on the `CONNECT` itself, and the
/// target sees no connection for a tunnel a rule answers.
@Suite("Fault injection: CONNECT tunnels", .harnessThreads)
struct ConnectTunnelFaultTests {
    /// An outbox that tunnels to `echo`, with a short response timeout for the `timeout` rule.
    private static func start(tunnellingTo echo: EchoServer, upstream: TestUpstream) async throws -> OutboxProcess {
        try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["*"], "connectPorts": [\(echo.port)]},
             "reachability": {"responseTimeoutSeconds": 0.5}}
            """)
    }

    private static func connect(_ outbox: OutboxProcess, to echo: EchoServer) throws -> (RawClient, HTTPResponse) {
        let client = try outbox.connect()
        try client.send("CONNECT 127.0.0.1:\(echo.port) HTTP/1.1\r\nHost: 127.0.0.1:\(echo.port)\r\n\r\n")
        return (client, try client.readResponse(to: "CONNECT"))
    }

    private static func replaceRules(_ outbox: OutboxProcess, with rule: String) throws {
        #expect(try outbox.send("DELETE", "/admin/faults").status == 200)
        _ = try FaultInjectionTests.addFault(outbox, rule)
    }

    @Test func offlineStatusTimeoutAndResetAnswerTheCONNECTAndTheTargetSeesNothing() async throws {
        let echo = try EchoServer()
        let upstream = try TestUpstream()
        let outbox = try await Self.start(tunnellingTo: echo, upstream: upstream)
        let origin = "https://127.0.0.1:\(echo.port)"

        try Self.replaceRules(outbox, with: #"{"action":"offline","match":{"origin":"\#(origin)"}}"#)
        let (_, refused) = try Self.connect(outbox, to: echo)
        expectErrorResponse(refused, status: 503, from: outbox)

        try Self.replaceRules(outbox, with: #"{"action":"status","status":502,"retryAfterSeconds":1,"body":"{\"error\":\"gateway\"}"}"#)
        let (_, answered) = try Self.connect(outbox, to: echo)
        #expect(answered.status == 502 && answered.bodyText == #"{"error":"gateway"}"#, "\(answered)")
        #expect(answered.headers["Retry-After"] == "1" && answered.headers["Content-Type"] == "application/json", "\(answered)")

        try Self.replaceRules(outbox, with: #"{"action":"timeout"}"#)
        let (_, timedOut) = try Self.connect(outbox, to: echo)
        expectErrorResponse(timedOut, status: 504, from: outbox)

        try Self.replaceRules(outbox, with: #"{"action":"reset"}"#)
        let (dropped, established) = try Self.connect(outbox, to: echo)
        #expect(established.status == 200, "\(established)")
        #expect(dropped.waitForClose(timeout: .seconds(5)), "the tunnel a reset rule answered stayed open\n\(outbox)")

        let rule = try #require(try FaultInjectionTests.faults(outbox).first)
        #expect(rule.int("matched") == 1 && rule.int("applied") == 1, "\(rule)")
        #expect(echo.acceptedConnectionCount == 0, "the target saw a tunnel a rule answered")
        #expect(upstream.receivedByteCount == 0)
    }

    @Test func latencyTunnelsForRealAndARuleForRequestsLeavesTunnelsAlone() async throws {
        let echo = try EchoServer()
        let upstream = try TestUpstream()
        let outbox = try await Self.start(tunnellingTo: echo, upstream: upstream)

        try Self.replaceRules(outbox, with: #"{"action":"latency","latencySeconds":0.3}"#)
        let started = ContinuousClock.now
        let (slow, late) = try Self.connect(outbox, to: echo)
        let waited = ContinuousClock.now - started
        #expect(late.status == 200, "\(late)\n\(outbox)")
        #expect(waited >= .milliseconds(300), "the CONNECT was answered after \(waited), inside the rule's 0.3 s")
        try slow.send("ping\n")
        #expect(try slow.readBytes(5) == Array("ping\n".utf8))
        #expect(echo.acceptedConnectionCount == 1)
        let latency = try #require(try FaultInjectionTests.faults(outbox).first)
        #expect(latency.int("applied") == 1, "\(latency)")

        // A method or a path prefix names requests; the CONNECT is neither, so the tunnel opens.
        try Self.replaceRules(outbox, with: #"{"action":"offline","match":{"method":"POST"}}"#)
        _ = try FaultInjectionTests.addFault(outbox, #"{"action":"offline","match":{"pathPrefix":"/v1"}}"#)
        let (open, opened) = try Self.connect(outbox, to: echo)
        #expect(opened.status == 200, "\(opened)\n\(outbox)")
        try open.send("pong\n")
        #expect(try open.readBytes(5) == Array("pong\n".utf8))
        for rule in try FaultInjectionTests.faults(outbox) {
            #expect(rule.int("matched") == 0, "\(rule)")
        }
    }
}

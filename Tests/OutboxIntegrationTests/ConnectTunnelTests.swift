import Testing

/// CONNECT: a byte-for-byte tunnel to an allowed port, 403 for other ports, 503 when
/// nothing answers there.
@Suite("CONNECT tunnels", .harnessThreads)
struct ConnectTunnelTests {
    @Test func tunnelCarriesBytesBothWaysUntilEitherSideCloses() async throws {
        let echo = try EchoServer()
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["*"], "connectPorts": [\(echo.port)]}}
            """)
        let client = try outbox.connect()
        try client.send("CONNECT 127.0.0.1:\(echo.port) HTTP/1.1\r\nHost: 127.0.0.1:\(echo.port)\r\n\r\n")
        let response = try client.readResponse(to: "CONNECT")
        #expect(response.status == 200, "\(response)\n\(outbox)")
        try #require(response.status == 200)

        // Bytes that look like HTTP must not be parsed inside the tunnel.
        let greeting = Array("GET / HTTP/1.1\r\nHost: not-parsed\r\n\r\nping\n".utf8)
        try client.send(greeting)
        #expect(try client.readBytes(greeting.count) == greeting)
        let payload = (0..<256 * 1024).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        try client.send(payload)
        #expect(try client.readBytes(payload.count, timeout: .seconds(20)) == payload, "\(outbox)")
        #expect(echo.acceptedConnectionCount == 1)
        #expect(upstream.receivedByteCount == 0)

        // Half-closing our side reaches the echo server, which closes; the tunnel then closes.
        client.shutdownWrite()
        #expect(client.waitForClose(timeout: .seconds(5)), "tunnel stayed open after both sides finished\n\(outbox)")
    }

    @Test func connectToAPortNotInConnectPortsIsForbidden() async throws {
        let echo = try EchoServer()
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["*"], "connectPorts": [443]}}
            """)
        let client = try outbox.connect()
        try client.send("CONNECT 127.0.0.1:\(echo.port) HTTP/1.1\r\nHost: 127.0.0.1:\(echo.port)\r\n\r\n")
        let response = try client.readResponse(to: "CONNECT")
        expectErrorResponse(response, status: 403, from: outbox)
        #expect(echo.acceptedConnectionCount == 0)
    }

    @Test func connectToAPortWithNothingListeningIsServiceUnavailable() async throws {
        let dead = try LocalPort.refusing()
        let deadPort = dead.port
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["*"], "connectPorts": [\(deadPort)]}}
            """)
        let client = try outbox.connect()
        try client.send("CONNECT 127.0.0.1:\(deadPort) HTTP/1.1\r\nHost: 127.0.0.1:\(deadPort)\r\n\r\n")
        let response = try client.readResponse(to: "CONNECT")
        expectErrorResponse(response, status: 503, from: outbox)
    }
}

import Testing

/// Requests are checked before anything is forwarded or stored, as a table: each bad
/// input gets its status and the JSON error body, the upstream receives nothing, a 4xx closes
/// the connection, and a fresh connection is served normally afterwards.
@Suite("Malformed and refused requests", .harnessThreads)
struct MalformedRequestTests {
    struct BadInput: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: String
        let status: Int

        var testDescription: String { "\(name) → \(status)" }
    }

    /// Small limits so that the oversized cases stay small. Inputs that are refused on their
    /// head send only the head: a proxy that closes with unread bytes in its buffer would
    /// make the kernel reset the connection and lose the response, a test artefact. The
    /// header timeout is short where it is what a test waits for (the 408 cases).
    static let headerTimeoutSeconds = 1.5
    static let config = config(headerTimeoutSeconds: headerTimeoutSeconds)
    /// For inputs answered as soon as they arrive: a test thread descheduled for longer than
    /// 1.5 s between connect and send (seen once in CI, with 600 tests sharing two cores) made
    /// the connection one that never sent a byte, which is closed without an answer.
    static let patientConfig = config(headerTimeoutSeconds: 60)

    static func config(headerTimeoutSeconds: Double) -> String {
        """
        {"limits": {"maxHeaderBytes": 4096, "headerTimeoutSeconds": \(headerTimeoutSeconds)}, "queue": {"maxBodyBytes": 1024}}
        """
    }

    static let inputs: [BadInput] = [
        BadInput(name: "request line without version", bytes: "GET /a\r\nHost: h\r\n\r\n", status: 400),
        BadInput(name: "request line of one token", bytes: "HELLO\r\n\r\n", status: 400),
        BadInput(name: "header line without colon", bytes: "GET /a HTTP/1.1\r\nHost: h\r\nNoColonHere\r\n\r\n", status: 400),
        BadInput(name: "whitespace before colon", bytes: "GET /a HTTP/1.1\r\nHost: h\r\nX-Bad : v\r\n\r\n", status: 400),
        BadInput(name: "Content-Length with Transfer-Encoding",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400),
        BadInput(name: "differing Content-Lengths",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", status: 400),
        BadInput(name: "non-numeric Content-Length",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5x\r\n\r\n", status: 400),
        BadInput(name: "negative Content-Length",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", status: 400),
        BadInput(name: "bad chunk size",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", status: 400),
        BadInput(name: "bare LF after chunk data",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\n0\r\n\r\n", status: 400),
        BadInput(name: "bare LF ending a chunk-size line",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", status: 400),
        BadInput(name: "bare LF ending the trailer section",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\n", status: 400),
        BadInput(name: "obs-fold", bytes: "GET /a HTTP/1.1\r\nHost: h\r\nX-Folded: a\r\n b\r\n\r\n", status: 400),
        BadInput(name: "bare CR in a header value", bytes: "GET /a HTTP/1.1\r\nHost: h\r\nX-Bare: a\rb\r\n\r\n", status: 400),
        BadInput(name: "header section over maxHeaderBytes",
                 bytes: "GET /a HTTP/1.1\r\nHost: h\r\nX-Big: \(String(repeating: "a", count: 6000))\r\n\r\n", status: 431),
        BadInput(name: "HTTP/1.1 without Host", bytes: "GET /a HTTP/1.1\r\nAccept: */*\r\n\r\n", status: 400),
        BadInput(name: "two Host headers", bytes: "GET /a HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n", status: 400),
        BadInput(name: "invalid Host value", bytes: "GET /a HTTP/1.1\r\nHost: bad host\r\n\r\n", status: 400),
        BadInput(name: "Content-Length over maxBodyBytes",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2048\r\n\r\n", status: 413),
        BadInput(name: "chunked body over maxBodyBytes",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n\(String(repeating: "x", count: 2048))\r\n",
                 status: 413),
        BadInput(name: "head not finished within headerTimeoutSeconds", bytes: "GET /a HTTP/1.1\r\nHost: h\r\n", status: 408),
        BadInput(name: "Transfer-Encoding gzip",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", status: 501),
        BadInput(name: "Transfer-Encoding gzip, chunked",
                 bytes: "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", status: 501),
        BadInput(name: "HTTP/2.0 request line", bytes: "GET /a HTTP/2.0\r\nHost: h\r\n\r\n", status: 505),
    ]

    @Test(arguments: inputs)
    func badInputIsRefusedBeforeReachingTheUpstream(_ input: BadInput) async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL,
                                                   config: input.status == 408 ? Self.config : Self.patientConfig)
        let client = try outbox.connect()
        try client.send(input.bytes)
        let response = try client.readResponse(timeout: .seconds(30))
        expectErrorResponse(response, status: input.status, from: outbox)
        if (400..<500).contains(input.status) {
            #expect(response.announcesClose, "a 4xx for a bad request must say Connection: close\n\(response)")
            #expect(client.waitForClose(), "connection stayed open after \(response.status)\n\(outbox)")
        }

        let after = try outbox.exchange("GET /after HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(after.status == 200, "a fresh connection after the bad one: \(after)\n\(outbox)")
        let requests = try await upstream.waitForRequests(1)
        #expect(requests.map(\.target) == ["/after"], "upstream got: \(requests)")
        #expect(upstream.receivedByteCount == requests.map(\.rawByteCount).reduce(0, +),
                "the upstream received bytes outside the /after request; problems: \(upstream.problems)")
    }

    @Test func headerTimeoutAnswersOnlyAfterTheConfiguredDelay() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.config)
        // Taken before connecting: the proxy's timer starts at accept, which comes after it.
        let started = ContinuousClock.now
        let client = try outbox.connect()
        try client.send("GET /slow-head HTTP/1.1\r\nHost: h\r\n")
        let response = try client.readResponse(timeout: .seconds(30))
        let elapsed = ContinuousClock.now - started
        expectErrorResponse(response, status: 408, from: outbox)
        #expect(elapsed >= .seconds(Self.headerTimeoutSeconds), "408 after \(elapsed), before headerTimeoutSeconds (\(Self.headerTimeoutSeconds) s)")
    }
}

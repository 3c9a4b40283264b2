import Testing

/// An origin may answer before it has read the request body (nginx's `return` does). The
/// proxy relays that answer at once, drains the rest of the client's body, and keeps the
/// client connection in step for the next request (RFC 9112 §9.6).
@Suite("Early responses", .harnessThreads)
struct EarlyResponseTests {
    /// Answers `201 ok` as soon as it has seen a request head, and drops body bytes. The body
    /// used here never contains CRLFCRLF, so each one in the stream ends one head.
    static func earlyAnsweringOrigin() throws -> ConnectionAcceptor {
        try ConnectionAcceptor { connection in
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            var matched = 0
            let terminator: [UInt8] = [13, 10, 13, 10]
            let answer = Array("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok".utf8)
            while true {
                let count = (try? buffer.withUnsafeMutableBytes { try Socket.receive(connection.fd, into: $0, deadline: nil) }) ?? 0
                if count == 0 { return }
                for byte in buffer[0..<count] {
                    matched = byte == terminator[matched] ? matched + 1 : (byte == 13 ? 1 : 0)
                    if matched == 4 {
                        matched = 0
                        guard (try? answer.withUnsafeBytes({ try Socket.sendAll(connection.fd, $0, deadline: nil) })) != nil else { return }
                    }
                }
            }
        }
    }

    @Test func answerBeforeTheBodyIsRelayedAndTheClientConnectionStaysUsable() async throws {
        let origin = try Self.earlyAnsweringOrigin()
        // POST is not queueable here: a queueable body is read whole before forwarding, so
        // only a streamed one can be answered early.
        let outbox = try await OutboxProcess.start(upstream: "http://127.0.0.1:\(origin.port)", config: """
            {"queue": {"methods": ["PATCH"]}}
            """)
        let client = try outbox.connect()
        let half = String(repeating: "a", count: 50_000)
        try client.send("POST /early HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n" + half)
        let first = try client.readResponse(to: "POST")
        #expect(first.status == 201, "\(first)\n\(outbox)")
        #expect(!first.announcesClose, "the early answer gave up the connection: \(first)")
        // The rest of the first body, then a second request on the same connection.
        try client.send(half + "POST /next HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc")
        let second = try client.readResponse(to: "POST")
        #expect(second.status == 201, "\(second)\n\(outbox)")
        #expect(second.bodyText == "ok")
    }

    @Test func pipelinedPostsToAnEarlyAnsweringOriginBothSucceed() async throws {
        let origin = try Self.earlyAnsweringOrigin()
        let outbox = try await OutboxProcess.start(upstream: "http://127.0.0.1:\(origin.port)")
        let body = String(repeating: "x", count: 1024)
        for round in 0..<20 {
            let client = try outbox.connect()
            // What the benchmark kit checks: two 1 KiB POSTs back to back, the second closing.
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\n")
            try client.send(body)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\nConnection: close\r\n\r\n")
            try client.send(body)
            let first = try client.readResponse(to: "POST")
            let second = try client.readResponse(to: "POST")
            try #require(first.status == 201 && second.status == 201, "round \(round): \(first)\n\(second)\n\(outbox)")
        }
    }
}

import Testing

/// Framing the proxy accepts is passed on in one unambiguous form: several identical
/// `Content-Length` values (two fields, or a list such as `5, 5`) leave as one field, whether
/// forwarded, stored and replayed, or relayed back from the upstream; a chunk whose data ends
/// in a bare LF is refused, from the client (400) and from the upstream alike.
@Suite("Framing forwarded in one form", .harnessThreads)
struct FramingTests {
    struct RepeatedLength: Sendable, CustomTestStringConvertible {
        let name: String
        /// The Content-Length field lines, CRLF included.
        let fields: String
        let body: String

        var testDescription: String { name }
    }

    static let repeatedLengths: [RepeatedLength] = [
        RepeatedLength(name: "two identical Content-Length fields", fields: "Content-Length: 5\r\nContent-Length: 5\r\n", body: "hello"),
        RepeatedLength(name: "Content-Length: 5, 5", fields: "Content-Length: 5, 5\r\n", body: "hello"),
        RepeatedLength(name: "Content-Length: 0 , 0", fields: "Content-Length: 0 , 0\r\n", body: ""),
    ]

    /// POST is queueable (read whole, then forwarded while the upstream is up); GET is
    /// streamed straight through: the two ways a request head is rewritten.
    @Test(arguments: repeatedLengths, ["POST", "GET"])
    func repeatedContentLengthReachesTheUpstreamAsOneField(_ input: RepeatedLength, _ method: String) async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        // A second request on the same connection shows both sides kept the same boundary.
        try client.send("\(method) /framed HTTP/1.1\r\nHost: h\r\n\(input.fields)\r\n\(input.body)"
                        + "GET /next HTTP/1.1\r\nHost: h\r\n\r\n")
        let first = try client.readResponse(to: method)
        let second = try client.readResponse()
        #expect(first.status == 200 && second.status == 200, "\(first)\n\(second)\n\(outbox)")

        let received = try await upstream.waitForRequests(2)
        #expect(received.map(\.target) == ["/framed", "/next"], "\(received)")
        let framed = try #require(received.first)
        #expect(framed.headers.values("Content-Length") == [String(input.body.utf8.count)],
                "upstream got:\n\(framed.headers)\n\(outbox)")
        #expect(framed.bodyText == input.body)
        #expect(upstream.problems.isEmpty, "\(upstream.problems)")
    }

    @Test(arguments: repeatedLengths)
    func storedRequestWithRepeatedContentLengthIsStoredAndReplayedWithOneField(_ input: RepeatedLength) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let client = try outbox.connect()
        try client.send("POST /items HTTP/1.1\r\nHost: h\r\nOutbox-Mode: queue\r\n\(input.fields)\r\n\(input.body)")
        let queued = try QueuedOperation(client.readResponse(to: "POST"))

        let stored = try outbox.operation(queued.id)
        let storedHeaders = try #require(stored.fields["headers"] as? [[String]], "\(stored)")
        let storedLengths = storedHeaders.filter { $0.first?.lowercased() == "content-length" }.map { $0.dropFirst().first }
        #expect(storedLengths == [String(input.body.utf8.count)], "stored: \(stored)")

        try upstream.restart()
        try outbox.drain()
        let delivery = try #require(try await upstream.waitForRequests(1).first)
        #expect(delivery.headers.values("Content-Length") == [String(input.body.utf8.count)], "replayed:\n\(delivery.headers)")
        #expect(delivery.bodyText == input.body)
        #expect(delivery.idempotencyKey == queued.idempotencyKey)
        #expect(upstream.problems.isEmpty, "\(upstream.problems)")
    }

    struct RepeatedResponseLength: Sendable, CustomTestStringConvertible {
        let name: String
        let method: String
        let fields: [HeaderField]
        let body: String

        var testDescription: String { "\(name) to \(method)" }
    }

    static let repeatedResponseLengths: [RepeatedResponseLength] = [
        RepeatedResponseLength(name: "two identical Content-Length fields", method: "GET",
                               fields: [HeaderField("Content-Length", "5"), HeaderField("Content-Length", "5")], body: "hello"),
        RepeatedResponseLength(name: "Content-Length: 5, 5", method: "GET",
                               fields: [HeaderField("Content-Length", "5, 5")], body: "hello"),
        // A response to HEAD is not framed by its Content-Length, which still describes the
        // representation: it reaches the client, as one field.
        RepeatedResponseLength(name: "Content-Length: 5, 5", method: "HEAD",
                               fields: [HeaderField("Content-Length", "5, 5")], body: "hello"),
    ]

    @Test(arguments: repeatedResponseLengths)
    func repeatedContentLengthFromTheUpstreamReachesTheClientAsOneField(_ input: RepeatedResponseLength) async throws {
        let upstream = try TestUpstream { _ in
            .respond(UpstreamResponse(headers: input.fields, body: .bytes(Array(input.body.utf8))))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        try client.send("\(input.method) /r HTTP/1.1\r\nHost: h\r\n\r\n")
        let response = try client.readResponse(to: input.method)
        #expect(response.status == 200, "\(response)\n\(outbox)")
        #expect(response.headers.values("Content-Length") == ["5"], "client got:\n\(response)")
        #expect(response.bodyText == (input.method == "HEAD" ? "" : input.body))
        // The connection is still in step: the next response is read where this one ended.
        try client.send("\(input.method) /again HTTP/1.1\r\nHost: h\r\n\r\n")
        let again = try client.readResponse(to: input.method)
        #expect(again.status == 200 && again.headers.values("Content-Length") == ["5"], "\(again)\n\(outbox)")
    }

    @Test func chunkDataEndingInABareLFFromTheUpstreamIsNotPassedOffAsComplete() async throws {
        let upstream = try TestUpstream { _ in
            .sendRawThenClose(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\n0\r\n\r\n".utf8))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        try client.send("GET /bare-lf HTTP/1.1\r\nHost: h\r\n\r\n")
        // The 200 head and the first chunk are relayed before the bad byte is read; the only
        // honest signal left is closing without the last chunk, which would claim a whole body.
        let text = String(decoding: try client.readUntilEOF(), as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200"), "\(text.debugDescription)\n\(outbox)")
        #expect(!text.hasSuffix("0\r\n\r\n"), "the client got a complete body:\n\(text.debugDescription)\n\(outbox)")
    }
}

import OutboxModel
import Testing

/// Request bodies: chunked and Content-Length bodies reach the upstream byte for byte,
/// and `Expect: 100-continue` is honoured.
@Suite("Request bodies", .harnessThreads)
struct RequestBodyTests {
    /// The upstream's answer: how many body bytes it got and their digest.
    static let bodyReporter: TestUpstream.Handler = { request in
        .respond(.text("\(request.body.count) \(SHA256.hex(of: request.body))"))
    }

    /// Checks that a body that was chunked on the client side arrived as `expected`, framed
    /// either way HTTP/1.1 allows a proxy (re-chunked, or with a Content-Length).
    static func expectIntactBody(_ request: RecordedRequest, _ expected: [UInt8],
                                 sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(request.body == expected, "got \(request.body.count) bytes, expected \(expected.count)",
                sourceLocation: sourceLocation)
        switch request.bodyFraming {
        case .chunked:
            #expect(!request.headers.contains("Content-Length"), "\(request.headers)", sourceLocation: sourceLocation)
        case .contentLength(let length):
            #expect(length == expected.count, sourceLocation: sourceLocation)
            #expect(!request.headers.contains("Transfer-Encoding"), "\(request.headers)", sourceLocation: sourceLocation)
        case .none:
            Issue.record("body arrived without framing: \(request.headers)", sourceLocation: sourceLocation)
        }
    }

    @Test func chunkedBodyWithExtensionsAndTrailerArrivesIntact() async throws {
        let upstream = try TestUpstream(handler: Self.bodyReporter)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        let second = Array("abcdefghijklmnopqrstuvwxyz".utf8)
        try client.send("POST /upload HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
            + "Content-Type: application/octet-stream\r\nTrailer: X-Checksum\r\nIdempotency-Key: chunked-1\r\n\r\n")
        try client.send("5;name=value\r\nhello\r\n")
        try client.send("1A\r\n" + String(decoding: second, as: UTF8.self) + "\r\n")
        try client.send("0;last\r\nX-Checksum: 1234\r\n\r\n")
        let expected = Array("hello".utf8) + second
        let response = try client.readResponse()
        #expect(response.status == 200, "\(response)\n\(outbox)")
        #expect(response.bodyText == "\(expected.count) \(SHA256.hex(of: expected))")
        let request = try #require(try await upstream.waitForRequests(1).first)
        Self.expectIntactBody(request, expected)
        #expect(request.headers["Content-Type"] == "application/octet-stream")
        #expect(!request.headers.contains("Trailer"), "Trailer is hop-by-hop: \(request.headers)")
    }

    @Test func largeChunkedBodyInIrregularChunksArrivesIntact() async throws {
        let upstream = try TestUpstream(handler: Self.bodyReporter)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        var stream = GeneratedBody(count: 700_001, seed: 3).makeStream()
        var payload = [UInt8](repeating: 0, count: 700_008)
        payload.removeLast(payload.count - stream.read(into: &payload))
        try client.send("PUT /big HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nIdempotency-Key: big-1\r\n\r\n")
        var offset = 0
        var size = 1
        while offset < payload.count {
            let take = min(size, payload.count - offset)
            // Uppercase hex on purpose: chunk sizes are case-insensitive (RFC 9112 §7.1).
            try client.send(Array((String(take, radix: 16, uppercase: true) + "\r\n").utf8)
                + payload[offset..<(offset + take)] + [13, 10])
            offset += take
            size = size * 3 + 7
        }
        try client.send("0\r\n\r\n")
        let response = try client.readResponse(timeout: .seconds(30))
        #expect(response.status == 200, "\(response)\n\(outbox)")
        #expect(response.bodyText == "\(payload.count) \(SHA256.hex(of: payload))")
        let request = try #require(try await upstream.waitForRequests(1).first)
        Self.expectIntactBody(request, payload)
    }

    @Test func contentLengthBodySentInPiecesArrivesIntact() async throws {
        let upstream = try TestUpstream(handler: Self.bodyReporter)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        let payload = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 8) }
        try client.send("POST /pieces HTTP/1.1\r\nHost: h\r\nIdempotency-Key: p-1\r\nContent-Length: \(payload.count)\r\n\r\n")
        for start in stride(from: 0, to: payload.count, by: 50_000) {
            try client.send(Array(payload[start..<min(payload.count, start + 50_000)]))
        }
        let response = try client.readResponse(timeout: .seconds(30))
        #expect(response.bodyText == "\(payload.count) \(SHA256.hex(of: payload))", "\(response)\n\(outbox)")
        let request = try #require(try await upstream.waitForRequests(1).first)
        #expect(request.body == payload)
        #expect(request.bodyFraming == .contentLength(payload.count))
    }

    @Test func expectContinueGetsInterimResponseBeforeTheBodyIsSent() async throws {
        let upstream = try TestUpstream(handler: Self.bodyReporter)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        try client.send("POST /expect HTTP/1.1\r\nHost: h\r\nIdempotency-Key: e-1\r\nContent-Length: 12\r\n"
            + "Expect: 100-continue\r\n\r\n")
        let interim = try client.readResponse(timeout: .seconds(5))
        #expect(interim.status == 100, "\(interim)\n\(outbox)")
        try client.send("twelve bytes")
        var final = try client.readResponse()
        // A proxy may relay the upstream's own 100 as well; several 1xx are legal (RFC 9110 §15.2).
        for _ in 0..<3 where final.status == 100 {
            final = try client.readResponse()
        }
        #expect(final.status == 200, "\(final)\n\(outbox)")
        #expect(final.bodyText == "12 \(SHA256.hex(of: Array("twelve bytes".utf8)))")
        let request = try #require(try await upstream.waitForRequests(1).first)
        #expect(request.bodyText == "twelve bytes")
    }

    @Test func expectContinueWithBodyOverTheLimitGetsFinal413InsteadOf100() async throws {
        let upstream = try TestUpstream(handler: Self.bodyReporter)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: #"{"queue": {"maxBodyBytes": 1024}}"#)
        let client = try outbox.connect()
        try client.send("POST /too-big HTTP/1.1\r\nHost: h\r\nContent-Length: 2048\r\nExpect: 100-continue\r\n\r\n")
        let response = try client.readResponse(timeout: .seconds(5))
        expectErrorResponse(response, status: 413, from: outbox)
        #expect(upstream.receivedByteCount == 0)
    }
}

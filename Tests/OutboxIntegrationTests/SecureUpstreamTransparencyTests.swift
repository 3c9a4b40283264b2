import Glibc
import Testing

/// Over TLS the request and response bytes pass exactly as over plain http: no header added,
/// removed, merged or reordered beyond the proxy's hop-by-hop and forwarding rules, bodies not
/// decoded, trailers and interim responses handled alike. Each test runs against the same
/// scripted origin over `http` and over `https` (a TLS front before it), so "as for http" is
/// checked, not assumed.
@Suite("HTTPS upstream: byte transparency", .harnessThreads)
struct SecureUpstreamTransparencyTests {
    /// Fields the proxy manages on the client hop of a response.
    static let responseHopFields: Set<String> = ["Via", "Connection", "Keep-Alive"]

    @Test(arguments: ProxiedOrigin.Scheme.allCases)
    func duplicateResponseHeadersStaySeparateFieldsInOrder(scheme: ProxiedOrigin.Scheme) async throws {
        let sent = [
            HeaderField("X-Dup", "one"),
            HeaderField("Set-Cookie", "a=1; Path=/"),
            HeaderField("Cache-Control", "no-cache"),
            HeaderField("X-Dup", "two"),
            HeaderField("Set-Cookie", "b=2"),
            HeaderField("Cache-Control", "private"),
            HeaderField("x-lower-case", "Value With  Spaces"),
            HeaderField("Content-Type", "text/plain"),
            HeaderField("Content-Length", "4"),
        ]
        let origin = try await ProxiedOrigin.start(scheme) { _ in
            .respond(UpstreamResponse(headers: sent, body: .bytes(Array("body".utf8))))
        }
        let response = try origin.outbox.exchange("GET /dup HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
        #expect(response.status == 200, "\(response)\n\(origin.diagnostics)")
        #expect(response.headers.removing(Self.responseHopFields) == sent, "client got:\n\(response.headers)")
        #expect(response.headers.values("Via") == ["1.1 outbox"], "\(response)")
        #expect(response.bodyText == "body")
    }

    /// A gzip body is passed as it came, `Content-Encoding` and `Content-Length` included: a
    /// proxy that decodes would hand the client other bytes under the same headers.
    @Test(arguments: ProxiedOrigin.Scheme.allCases)
    func gzipBodyPassesEncodedByteForByte(scheme: ProxiedOrigin.Scheme) async throws {
        // gzip.compress(b'{"message": "compressed, and passed on compressed"}\n' * 8, mtime=0)
        let gzipped: [UInt8] = [
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xab, 0x56, 0xca, 0x4d, 0x2d, 0x2e,
            0x4e, 0x4c, 0x4f, 0x55, 0xb2, 0x52, 0x50, 0x4a, 0xce, 0xcf, 0x2d, 0x28, 0x02, 0x72, 0x53, 0x53,
            0x74, 0x14, 0x12, 0xf3, 0x52, 0x14, 0x0a, 0x12, 0x41, 0x6c, 0x85, 0xfc, 0x3c, 0x05, 0x84, 0x8c,
            0x52, 0x2d, 0x57, 0xf5, 0xa8, 0x1e, 0xba, 0xe9, 0x01, 0x00, 0xff, 0x7e, 0x02, 0x48, 0xa0, 0x01,
            0x00, 0x00,
        ]
        let origin = try await ProxiedOrigin.start(scheme) { _ in
            .respond(UpstreamResponse(headers: [
                HeaderField("Content-Type", "application/json"),
                HeaderField("Content-Encoding", "gzip"),
                HeaderField("Vary", "Accept-Encoding"),
            ], body: .bytes(gzipped)))
        }
        let response = try origin.outbox.exchange(
            "GET /compressed HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip\r\n\r\n", timeout: .seconds(20))
        #expect(response.status == 200, "\(response)\n\(origin.diagnostics)")
        #expect(response.headers.values("Content-Encoding") == ["gzip"], "\(response.headers)")
        #expect(response.framing == .contentLength(gzipped.count), "\(response.headers)")
        #expect(response.body == gzipped, "the body was changed (decoded?): \(response.body.count) bytes")
        let request = try #require(try await origin.backend.waitForRequests(1).first)
        #expect(request.headers.values("Accept-Encoding") == ["gzip"], "origin got:\n\(request.headers)")
    }

    @Test(arguments: ProxiedOrigin.Scheme.allCases)
    func trailersOfAChunkedResponsePass(scheme: ProxiedOrigin.Scheme) async throws {
        let body = Array(String(repeating: "chunk of text, ", count: 2000).utf8)
        let trailers = [HeaderField("X-Checksum", "sha256=abc123"), HeaderField("Server-Timing", "db;dur=53")]
        let origin = try await ProxiedOrigin.start(scheme) { _ in
            .respond(UpstreamResponse(headers: [HeaderField("Content-Type", "text/plain")],
                                      body: .bytes(body), framing: .chunked(chunkSize: 4096, trailers: trailers)))
        }
        let response = try origin.outbox.exchange(
            "GET /trailers HTTP/1.1\r\nHost: h\r\nTE: trailers\r\n\r\n", timeout: .seconds(20))
        #expect(response.status == 200, "\(response)\n\(origin.diagnostics)")
        #expect(response.framing == .chunked, "\(response.headers)")
        #expect(response.body == body, "\(response.body.count) of \(body.count) bytes")
        #expect(response.trailers.fields == trailers, "client got trailers:\n\(response.trailers)")
    }

    /// What the client sent reaches the origin field for field, names in their case, duplicates
    /// apart and in order; the proxy adds only `Via` and `X-Forwarded-*` and sets `Host`. (The
    /// URLSession transport used to add `Accept-Encoding`, `User-Agent` and `Accept-Language`.)
    @Test(arguments: ProxiedOrigin.Scheme.allCases)
    func noRequestHeaderIsAddedBeyondViaAndForwardedHeaders(scheme: ProxiedOrigin.Scheme) async throws {
        let clientFields = [
            HeaderField("Accept", "application/json"),
            HeaderField("X-Repeated", "first"),
            HeaderField("authorization", "Bearer t0ken"),
            HeaderField("X-Repeated", "second"),
            HeaderField("X-Empty", ""),
            HeaderField("Idempotency-Key", "transparency-1"),
            HeaderField("Content-Type", "text/plain"),
            HeaderField("Content-Length", "5"),
        ]
        let origin = try await ProxiedOrigin.start(scheme)
        var head = "PUT /fields HTTP/1.1\r\nHost: client.example\r\n"
        for field in clientFields { head += "\(field.name): \(field.value)\r\n" }
        let response = try origin.outbox.exchange(head + "\r\nhello", method: "PUT", timeout: .seconds(20))
        #expect(response.status == 200, "\(response)\n\(origin.diagnostics)")

        let request = try #require(try await origin.backend.waitForRequests(1).first)
        let owned: Set<String> = ["Host", "Via", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Connection"]
        #expect(request.headers.removing(owned) == clientFields, "origin got:\n\(request.headers)")
        #expect(request.headers.values("Host") == [origin.authority])
        #expect(request.headers.values("Via") == ["1.1 outbox"])
        #expect(request.headers.values("X-Forwarded-Host") == ["client.example"])
        // The client spoke plain http to the proxy, whatever the scheme upstream.
        #expect(request.headers.values("X-Forwarded-Proto") == ["http"])
        #expect(request.headers.tokens("Connection").allSatisfy { ["keep-alive", "close"].contains($0) },
                "\(request.headers)")
        #expect(request.bodyText == "hello")
    }

    @Test(arguments: ProxiedOrigin.Scheme.allCases)
    func expectContinueGetsInterimResponseBeforeTheBodyIsSent(scheme: ProxiedOrigin.Scheme) async throws {
        let origin = try await ProxiedOrigin.start(scheme) { request in .respond(.text("got \(request.body.count)")) }
        let client = try origin.outbox.connect()
        try client.send("POST /expect HTTP/1.1\r\nHost: h\r\nIdempotency-Key: e-1\r\nContent-Length: 12\r\n"
            + "Expect: 100-continue\r\n\r\n")
        let interim = try client.readResponse(timeout: .seconds(10))
        #expect(interim.status == 100, "\(interim)\n\(origin.diagnostics)")
        try client.send("twelve bytes")
        var final = try client.readResponse(timeout: .seconds(20))
        // A proxy may relay the origin's own 100 as well; several 1xx are legal (RFC 9110 §15.2).
        for _ in 0..<3 where final.status == 100 {
            final = try client.readResponse(timeout: .seconds(20))
        }
        #expect(final.status == 200, "\(final)\n\(origin.diagnostics)")
        #expect(final.bodyText == "got 12")
        let request = try #require(try await origin.backend.waitForRequests(1).first)
        #expect(request.bodyText == "twelve bytes")
    }

    /// An origin's `103 Early Hints` before its final answer: whatever the proxy does with it
    /// over http (relay it or drop it), it does over https, and the final response arrives.
    @Test func interimResponsesFromTheOriginAreHandledAsForHttp() async throws {
        let raw = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"
            + "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nfinal"
        var seen: [ProxiedOrigin.Scheme: [String]] = [:]
        for scheme in ProxiedOrigin.Scheme.allCases {
            let origin = try await ProxiedOrigin.start(scheme) { _ in .sendRawThenClose(Array(raw.utf8)) }
            let client = try origin.outbox.connect()
            try client.send("GET /hints HTTP/1.1\r\nHost: h\r\n\r\n")
            var responses: [HTTPResponse] = []
            repeat {
                do {
                    responses.append(try client.readResponse(timeout: .seconds(20)))
                } catch {
                    throw HarnessError("\(scheme): after \(responses.map(\.status)): \(error)\n\(origin.diagnostics)")
                }
            } while (responses.last?.status ?? 0) < 200 && responses.count < 4
            let final = try #require(responses.last)
            #expect(final.status == 200, "\(scheme): \(final)\n\(origin.diagnostics)")
            #expect(final.bodyText == "final", "\(scheme)")
            seen[scheme] = responses.map { "\($0.status) \($0.headers.removing(Self.responseHopFields.union(["Content-Length"])))" }
        }
        #expect(seen[.https] == seen[.http], "http: \(seen[.http] ?? [])\nhttps: \(seen[.https] ?? [])")
    }
}

/// An https origin's connections are pooled like http ones: the TLS handshake is paid once per
/// upstream connection, not per request.
@Suite("HTTPS upstream: keep-alive and streaming", .harnessThreads)
struct SecureUpstreamConnectionTests {
    @Test func sequentialRequestsOnOneClientConnectionShareOneTLSConnection() async throws {
        let origin = try await ProxiedOrigin.start { request in .respond(.text("answer to \(request.target)")) }
        let front = try #require(origin.front)
        let client = try origin.outbox.connect()
        for index in 0..<3 {
            try client.send("GET /ka/\(index) HTTP/1.1\r\nHost: h\r\n\r\n")
            let response = try client.readResponse(timeout: .seconds(20))
            try #require(response.status == 200, "request \(index): \(response)\n\(origin.diagnostics)")
            #expect(response.bodyText == "answer to /ka/\(index)")
        }
        try await front.waitForConnections(1)
        #expect(front.connections == 1, "TLS connections: \(front.connections)\n\(front)")

        // Idle time, the scenario itself (nothing is awaited): a pooled TLS connection must
        // survive a pause well inside the pool's idle limit.
        try await Task.sleep(for: .seconds(1))
        try client.send("GET /ka/after-pause HTTP/1.1\r\nHost: h\r\n\r\n")
        let afterPause = try client.readResponse(timeout: .seconds(20))
        #expect(afterPause.status == 200, "\(afterPause)\n\(origin.diagnostics)")
        #expect(front.connections == 1, "TLS connections after the pause: \(front.connections)\n\(front)")
        #expect(origin.backend.acceptedConnectionCount == 1, "backend connections: \(origin.backend.acceptedConnectionCount)")
        #expect(origin.backend.requests.map(\.target) == ["/ka/0", "/ka/1", "/ka/2", "/ka/after-pause"])
    }

    /// A new connection to an origin resumes the session of the one before (TLS 1.3 tickets
    /// arrive after the handshake, with the first response): the origin closes after every
    /// answer, so each request needs a new connection, all from the one client connection's
    /// loop, whose pool keeps the session.
    @Test func aNewConnectionResumesTheOriginsLastSession() async throws {
        let origin = try await ProxiedOrigin.start { request in
            .respond(.text("fresh \(request.target)", headers: [HeaderField("Connection", "close")]))
        }
        let front = try #require(origin.front)
        let client = try origin.outbox.connect()
        for index in 0..<3 {
            try client.send("GET /resume/\(index) HTTP/1.1\r\nHost: h\r\n\r\n")
            let response = try client.readResponse(timeout: .seconds(20))
            try #require(response.status == 200, "request \(index): \(response)\n\(origin.diagnostics)")
        }
        let handshakes = try await front.waitForConnections(3)
        #expect(handshakes.map(\.resumed) == [false, true, true], "\(front)")
    }

    /// Client connections taken in turn reuse the pooled TLS connections. The pool is per
    /// event loop (one loop per core, client connections dealt round-robin), so twice as many
    /// client connections as loops open at most one TLS connection per loop.
    @Test func clientConnectionsInTurnReuseTheTLSConnections() async throws {
        let origin = try await ProxiedOrigin.start()
        let front = try #require(origin.front)
        let loops = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        for index in 0..<(2 * loops) {
            let response = try origin.outbox.exchange("GET /turn/\(index) HTTP/1.1\r\nHost: h\r\n\r\n", timeout: .seconds(20))
            try #require(response.status == 200, "client connection \(index): \(response)\n\(origin.diagnostics)")
        }
        try await front.waitForConnections(1)
        #expect(front.connections <= loops,
                "\(2 * loops) client connections in turn made \(front.connections) TLS connections (\(loops) loops)\n\(front)")
    }

    @Test func sixtyFourMebibyteDownloadArrivesIntactWithBoundedMemory() async throws {
        let size = 64 << 20
        let generated = GeneratedBody(count: size, seed: 0x7150_0b0c)
        let origin = try await ProxiedOrigin.start { _ in
            .respond(UpstreamResponse(headers: [HeaderField("Content-Type", "application/octet-stream")],
                                      body: .generated(generated)))
        }
        let client = try origin.outbox.connect(readSize: 64 * 1024)
        try client.send("GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
        // Pausing every 4 MiB lets the buffers fill: the proxy has to stop reading from the
        // origin (and decrypting) instead of holding the body in memory.
        let response = try client.readResponse(
            timeout: .seconds(180), body: .digestWithPauses(everyBytes: 4 << 20, pause: .milliseconds(25)))
        #expect(response.status == 200, "\(response)\n\(origin.diagnostics)")
        #expect(response.framing == .contentLength(size))
        #expect(response.bodyByteCount == size)
        #expect(response.bodySHA256 == generated.sha256Hex(), "body differs\n\(origin.diagnostics)")
        let peak = try origin.outbox.peakRSSBytes()
        #expect(peak < 100_000_000, "peak RSS \(peak / 1_000_000) MB\n\(origin.outbox)")
    }
}

import Foundation
import OutboxModel
import Testing

/// The harness checks itself: if these fail, a red proxy test says nothing about the proxy.
/// (The digest it compares bodies by is the product's SHA-256, checked on its own against the
/// FIPS 180-4 examples and coreutils' `sha256sum` by the core tests' `SHA256Tests`.)
@Suite("Harness self-checks", .harnessThreads)
struct HarnessSelfTests {
    @Test func generatedBodyDigestIsStableAndSplitIndependent() {
        let body = GeneratedBody(count: 100_003, seed: 42)
        var stream = body.makeStream()
        var all: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let produced = stream.read(into: &buffer)
            if produced == 0 { break }
            all += buffer[0..<produced]
        }
        #expect(all.count == 100_003)
        #expect(SHA256.hex(of: all) == body.sha256Hex())
        #expect(body.sha256Hex() != GeneratedBody(count: 100_003, seed: 43).sha256Hex())
    }
}

/// The test upstream, echo server, raw client and process launcher work on their own, checked
/// against curl and each other, so they can be trusted as the proxy's judges.
@Suite("Harness servers and clients", .harnessThreads)
struct HarnessServerTests {
    @Test func upstreamAnswersCurlAndRecordsGetAndChunkedPost() async throws {
        let curl = try #require(ChildProcess.which("curl"), "curl is not installed")
        let upstream = try TestUpstream { request in
            .respond(.text("seen \(request.method) \(request.target) \(request.body.count)"))
        }
        let get = try await ChildProcess.run(curl, ["-sS", "--max-time", "10", "\(upstream.baseURL)/a/b?c=d"])
        #expect(get.exit == .exited(0), "\(get.stderrText)")
        #expect(get.stdoutText == "seen GET /a/b?c=d 0")

        let directory = try TemporaryDirectory()
        let payload = (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let file = try directory.write(payload, to: "payload.bin")
        let post = try await ChildProcess.run(curl, [
            "-sS", "--max-time", "10", "-H", "Transfer-Encoding: chunked", "--data-binary", "@\(file)",
            "\(upstream.baseURL)/upload",
        ])
        #expect(post.stdoutText == "seen POST /upload 3000", "\(post.stderrText)")
        let requests = try await upstream.waitForRequests(2)
        #expect(requests[0].headers["Host"] == upstream.authority)
        #expect(requests[1].bodyFraming == .chunked)
        #expect(requests[1].body == payload)
        #expect(upstream.problems.isEmpty)
        #expect(upstream.receivedByteCount == requests.map(\.rawByteCount).reduce(0, +))
    }

    @Test func upstreamKeepsAliveAndStreamsGeneratedBodiesBothWays() async throws {
        let generated = GeneratedBody(count: 1_000_003, seed: 9)
        let upstream = try TestUpstream { request in
            switch request.target {
            case "/chunked": .respond(UpstreamResponse(
                body: .generated(generated), framing: .chunked(chunkSize: 10_000, trailers: [HeaderField("X-Sum", "1")])))
            case "/length": .respond(UpstreamResponse(body: .generated(generated)))
            default: .respond(.text("echo:" + request.bodyText))
            }
        }
        let client = try RawClient(port: upstream.port)
        try client.send("GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n")
        let chunked = try client.readResponse(body: .digestOnly)
        #expect(chunked.framing == .chunked)
        #expect(chunked.trailers["X-Sum"] == "1")
        #expect(chunked.bodyByteCount == generated.count)
        #expect(chunked.bodySHA256 == generated.sha256Hex())

        try client.send("HEAD /length HTTP/1.1\r\nHost: x\r\n\r\nGET /length HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = try client.readResponse(to: "HEAD")
        #expect(head.headers["Content-Length"] == "1000003")
        #expect(head.body.isEmpty)
        let length = try client.readResponse(body: .digestOnly)
        #expect(length.framing == .contentLength(1_000_003))
        #expect(length.bodySHA256 == generated.sha256Hex())

        try client.send("POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        let interim = try client.readResponse()
        #expect(interim.status == 100)
        try client.send("hello")
        #expect(try client.readResponse().bodyText == "echo:hello")

        try client.send("POST /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-T: v\r\n\r\n")
        #expect(try client.readResponse().bodyText == "echo:abcde")
        let requests = try await upstream.waitForRequests(5)
        #expect(Set(requests.map(\.connectionID)).count == 1)
        #expect(requests[4].chunkedInfo?.extensions == ["ext=1"])
        #expect(requests[4].chunkedInfo?.trailers["X-T"] == "v")
        #expect(upstream.acceptedConnectionCount == 1)
    }

    @Test func upstreamHoldsUntilGateOpensAndRunsFailureScripts() async throws {
        let gate = Gate()
        let upstream = try TestUpstream { request in
            switch request.target {
            case "/held": .hold(until: gate, then: .respond(.text("released")))
            case "/garbage": .sendRawThenClose(Array("not http at all\r\n\r\n".utf8))
            case "/head-only": .sendHeadThenClose(.text("never sent"))
            default: .closeWithoutAnswer
            }
        }
        let held = try RawClient(port: upstream.port)
        try held.send("GET /held HTTP/1.1\r\nHost: x\r\n\r\n")
        try await upstream.waitForRequests(1)
        #expect(throws: SocketError.self) { try held.readResponse(timeout: .milliseconds(200)) }
        gate.open()
        #expect(try held.readResponse().bodyText == "released")

        let garbage = try RawClient(port: upstream.port)
        try garbage.send("GET /garbage HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try garbage.readUntilEOF() == Array("not http at all\r\n\r\n".utf8))

        let headOnly = try RawClient(port: upstream.port)
        try headOnly.send("GET /head-only HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(throws: SocketError.self) { try headOnly.readResponse() }

        let silent = try RawClient(port: upstream.port)
        try silent.send("GET /silent HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(silent.waitForClose())
    }

    @Test func upstreamStopsRefusingConnectionsAndRestartsOnTheSamePort() async throws {
        let upstream = try TestUpstream()
        let idle = try RawClient(port: upstream.port)
        try idle.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try idle.readResponse().status == 200)
        let stopStarted = ContinuousClock.now
        upstream.stop()
        #expect(ContinuousClock.now - stopStarted < .seconds(2), "stop() must not wait for its timeout")
        #expect(idle.waitForClose())
        #expect(RawClient.isRefused(port: upstream.port))
        try upstream.restart()
        let again = try RawClient(port: upstream.port)
        try again.send("GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try again.readResponse().bodyText == "ok")
        #expect(upstream.requests.map(\.target) == ["/", "/again"])
    }

    @Test func echoServerEchoesLargeWrites() throws {
        let echo = try EchoServer()
        let client = try RawClient(port: echo.port)
        let payload = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 5) }
        try client.send(payload)
        #expect(try client.readBytes(payload.count) == payload)
        client.shutdownWrite()
        #expect(client.waitForClose())
    }

    @Test func unusedPortRefusesAndReservedPortAccepts() throws {
        let dead = try LocalPort.refusing()
        #expect(RawClient.isRefused(port: dead.port))
        let reservation = try LocalPort.reserve()
        #expect(!RawClient.isRefused(port: reservation.port))
    }

    @Test func processLauncherParsesListeningLineAndReportsSignals() async throws {
        let directory = try TemporaryDirectory()
        let fake = try directory.write("""
            #!/bin/sh
            echo "some log line" >&2
            echo "outbox listening on http://127.0.0.1:4242" >&2
            exec sleep 30
            """, to: "fake-outbox")
        chmod(fake, 0o755)
        let process = try await OutboxProcess.start(upstream: "http://127.0.0.1:1", executable: fake)
        #expect(process.port == 4242)
        #expect(try process.peakRSSBytes() > 0)
        process.terminate()
        #expect(try await process.waitForExit() == .signaled(SIGTERM))

        let quitter = try directory.write("#!/bin/sh\necho 'cannot start: reasons' >&2\nexit 3\n", to: "quitter")
        chmod(quitter, 0o755)
        let error = await #expect(throws: HarnessError.self) {
            try await OutboxProcess.start(upstream: "http://127.0.0.1:1", executable: quitter)
        }
        #expect(error?.description.contains("cannot start: reasons") == true, "\(error.map { "\($0)" } ?? "no error")")
    }

    @Test func outboxBinaryIsBuiltNextToTheTestRunner() {
        #expect(FileManager.default.isExecutableFile(atPath: OutboxProcess.binaryPath), "\(OutboxProcess.binaryPath)")
    }
}

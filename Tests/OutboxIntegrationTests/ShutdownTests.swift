import Glibc
import Testing

/// SIGTERM / SIGINT: stop accepting, finish in-flight exchanges, exit 0, so a service manager
/// can stop Outbox without cutting a client off mid-response.
@Suite("Graceful shutdown", .harnessThreads)
struct ShutdownTests {
    @Test(arguments: [SIGTERM, SIGINT])
    func inFlightExchangeCompletesAfterTheSignalAndTheProcessExitsZero(signal: Int32) async throws {
        let released = Gate()
        let generated = GeneratedBody(count: 256 * 1024, seed: 5)
        let upstream = try TestUpstream { request in
            request.target == "/slow" ? .hold(until: released, then: .respond(UpstreamResponse(body: .generated(generated)))) : .respond(.text("ok"))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect()
        try client.send("GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
        try await upstream.waitForRequests(1)

        outbox.terminate(signal: signal)
        // Stopping to accept is the observable sign that the signal was handled; only then is
        // the upstream released, so the exchange is truly in flight across the signal.
        try await outbox.waitForLog(containing: "accepting_stopped", timeout: .seconds(5))
        #expect(outbox.child.isRunning, "exited before the in-flight exchange finished\n\(outbox)")
        #expect(RawClient.isRefused(port: outbox.port), "still accepting 5 s after the signal\n\(outbox)")

        released.open()
        let response = try client.readResponse(timeout: .seconds(10), body: .digestOnly)
        #expect(response.status == 200, "\(response)\n\(outbox)")
        #expect(response.bodyByteCount == generated.count)
        #expect(response.bodySHA256 == generated.sha256Hex())

        let status = try await outbox.waitForExit(timeout: .seconds(15))
        #expect(status == .exited(0), "\(outbox)")
        #expect(RawClient.isRefused(port: outbox.port))
    }

    @Test func idleProxyExitsZeroOnSIGTERM() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let response = try outbox.exchange("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(response.status == 200, "\(outbox)")
        outbox.terminate(signal: SIGTERM)
        #expect(try await outbox.waitForExit(timeout: .seconds(15)) == .exited(0), "\(outbox)")
        #expect(!looksLikeStackTrace(outbox.stderrText), "\(outbox)")
    }
}

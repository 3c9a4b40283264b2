import Testing

/// Responses are streamed to the client as they arrive, so a 1 GB download never sits in
/// memory: a 64 MiB body passes through intact while the proxy's peak RSS stays small.
@Suite("Streaming responses", .harnessThreads)
struct StreamingResponseTests {
    static let bodySize = 64 << 20
    static let peakRSSLimit = 100_000_000

    enum Framing: String, CaseIterable, Sendable {
        case contentLength
        case chunked
    }

    @Test(arguments: Framing.allCases)
    func sixtyFourMebibyteBodyArrivesIntactWithBoundedMemory(framing: Framing) async throws {
        let generated = GeneratedBody(count: Self.bodySize, seed: 0x0b0c)
        let upstream = try TestUpstream { _ in
            .respond(UpstreamResponse(
                headers: [HeaderField("Content-Type", "application/octet-stream")],
                body: .generated(generated),
                framing: framing == .chunked ? .chunked(chunkSize: 32 * 1024) : .contentLength))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let client = try outbox.connect(readSize: 64 * 1024)
        try client.send("GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
        // Pausing every 4 MiB lets the proxy's socket buffers fill: it has to stop reading from
        // the upstream instead of buffering the body in memory.
        let response = try client.readResponse(
            timeout: .seconds(120), body: .digestWithPauses(everyBytes: 4 << 20, pause: .milliseconds(25)))
        #expect(response.status == 200, "\(response)\n\(outbox)")
        #expect(response.bodyByteCount == Self.bodySize)
        #expect(response.bodySHA256 == generated.sha256Hex(), "body differs\n\(outbox)")
        if framing == .contentLength {
            #expect(response.framing == .contentLength(Self.bodySize))
        }
        let peak = try outbox.peakRSSBytes()
        #expect(peak < Self.peakRSSLimit, "peak RSS \(peak / 1_000_000) MB\n\(outbox)")
    }
}

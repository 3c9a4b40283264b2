import Glibc
import Testing

/// Idempotency keys: a repeated write with the same key and request is the same
/// operation, delivered once; the same key with another body is refused with 422; once
/// completed, a repeat gets the stored upstream response marked `Idempotent-Replayed: true`.
@Suite("Queue: idempotency", .harnessThreads)
struct QueueIdempotencyTests {
    @Test func repeatedKeyIsOneOperationDeliveredOnceThenReplayedFromStore() async throws {
        let upstream = try TestUpstream { request in
            .respond(.text("created \(request.bodyText)", status: 201, headers: [HeaderField("X-Upstream", "yes")]))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let key = [HeaderField("Idempotency-Key", "pay-123")]

        let first = try outbox.enqueue(body: "amount=5", headers: key)
        let again = try outbox.enqueue(body: "amount=5", headers: key)
        #expect(again.id == first.id, "the same request was stored twice: \(first.id) vs \(again.id)")
        #expect(again.idempotencyKey == "pay-123")

        let other = try outbox.send("POST", "/items", body: "amount=500", headers: key)
        expectErrorResponse(other, status: 422, from: outbox)

        try upstream.restart()
        try outbox.drain()
        let received = try await upstream.waitForRequests(1)
        #expect(received.count == 1, "\(received.map(\.bodyText))")
        #expect(received.first?.bodyText == "amount=5")
        #expect(received.first?.idempotencyKey == "pay-123")

        let replayed = try outbox.send("POST", "/items", body: "amount=5", headers: key)
        #expect(replayed.status == 201, "\(replayed)\n\(outbox)")
        #expect(replayed.bodyText == "created amount=5", "\(replayed)")
        #expect(replayed.headers["Idempotent-Replayed"] == "true", "\(replayed)")
        #expect(replayed.headers["Outbox-Operation-Id"] == first.id, "\(replayed)")
        #expect(replayed.headers["X-Upstream"] == "yes", "stored headers not replayed: \(replayed)")
        #expect(upstream.requests.count == 1, "the repeat reached the upstream: \(upstream.requests.map(\.bodyText))")
    }

    /// The key in a `202` for a request that came without one is Outbox's own, and its record
    /// carries no digest: a client that repeats the request under that key must still get the
    /// same operation, and another request under it a 422, also from a restarted process that
    /// knows the operation from disk only.
    @Test func keyOutboxMadeUpRecognisesItsRequestAcrossKillNine() async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let home = try TemporaryDirectory()
        let data = home.file("data")
        let config = OutboxProcess.fastQueueConfig()
        let first = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data)
        let stored = try first.enqueue("/orders?x=1", body: "amount=5")
        let key = [HeaderField("Idempotency-Key", stored.idempotencyKey)]

        func expectOneOperation(_ outbox: OutboxProcess, _ moment: String) throws {
            let again = try outbox.enqueue("/orders?x=1", body: "amount=5", headers: key)
            #expect(again.id == stored.id, "\(moment): the same request under its made-up key was stored again: \(again.id) vs \(stored.id)")
            expectErrorResponse(try outbox.send("POST", "/orders?x=1", body: "amount=6", headers: key), status: 422, from: outbox)
            expectErrorResponse(try outbox.send("POST", "/orders?x=2", body: "amount=5", headers: key), status: 422, from: outbox)
            expectErrorResponse(try outbox.send("PUT", "/orders?x=1", body: "amount=5", headers: key), status: 422, from: outbox)
            let status = try JSONObject(outbox.admin("status"))
            #expect(status.object("counts")?.int("pending") == 1, "\(moment): \(status)")
        }
        try expectOneOperation(first, "before the kill")
        first.terminate(signal: SIGKILL)
        #expect(try await first.waitForExit() == .signaled(SIGKILL))
        let second = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data)
        try expectOneOperation(second, "after kill -9 and a restart")
    }

    @Test func sameKeyWithAnotherTargetIsUnprocessable() async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let key = [HeaderField("Idempotency-Key", "k-target")]

        _ = try outbox.enqueue("/a", body: "same", headers: key)
        let response = try outbox.send("POST", "/b", body: "same", headers: key)
        expectErrorResponse(response, status: 422, from: outbox)
        let status = try JSONObject(outbox.admin("status"))
        #expect(status.object("counts")?.int("pending") == 1, "\(status)")
    }
}

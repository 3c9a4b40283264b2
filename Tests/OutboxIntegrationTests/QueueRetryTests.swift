import Synchronization
import Testing

/// Retries of a stored write (`retry.*`): retryable answers are
/// tried again with the attempt number counting up, an upstream `Retry-After` sets the
/// pause, and after `1 + maxRetries` attempts the operation fails.
@Suite("Queue: retries", .harnessThreads)
struct QueueRetryTests {
    @Test(arguments: TestStore.both) func twoServiceUnavailableThenCreatedCompletesOnTheThirdAttempt(store: TestStore) async throws {
        let upstream = try TestUpstream { request in
            request.index < 2 ? .respond(.text("down", status: 503)) : .respond(.text("made it", status: 201))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(
            retry: #""maxRetries": 5, "baseDelaySeconds": 0.05, "multiplier": 1, "jitter": false"#), store: store)

        let queued = try outbox.enqueue(body: "persist", headers: [HeaderField("Outbox-Mode", "queue")])
        try outbox.drain()

        let received = upstream.requests
        #expect(received.map(\.attempt) == [1, 2, 3], "\(received.map(\.attempt))\n\(outbox)")
        #expect(Set(received.map(\.idempotencyKey)) == [queued.idempotencyKey], "the key changed between attempts")
        #expect(received.allSatisfy { $0.bodyText == "persist" })
        let done = try outbox.operation(queued.id)
        #expect(done.string("status") == "completed", "\(done)")
        #expect(done.int("retryCount") == 2, "\(done)")
        #expect(done.object("response")?.int("status") == 201, "\(done)")
        #expect(done.object("response")?.string("body") == "made it", "\(done)")
    }

    @Test(arguments: TestStore.both) func upstreamRetryAfterDelaysTheNextAttempt(store: TestStore) async throws {
        let arrivals = Mutex<[ContinuousClock.Instant]>([])
        let upstream = try TestUpstream { request in
            arrivals.withLock { $0.append(.now) }
            return request.index == 0
                ? .respond(.text("later", status: 503, headers: [HeaderField("Retry-After", "1")]))
                : .respond(.text("done", status: 201))
        }
        // The policy alone would retry after 0.05 s: only Retry-After explains a longer pause.
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(
            retry: #""maxRetries": 3, "baseDelaySeconds": 0.05, "multiplier": 1, "jitter": false"#), store: store)

        let queued = try outbox.enqueue(body: "wait", headers: [HeaderField("Outbox-Mode", "queue")])
        try outbox.drain()

        let times = arrivals.withLock { $0 }
        try #require(times.count == 2, "\(upstream.requests.map(\.attempt))\n\(outbox)")
        let pause = times[1] - times[0]
        // Timestamps are taken when each request has been read: the proxy's pause starts
        // after the first was read, so the gap can only be longer than its real delay.
        #expect(pause >= .seconds(1), "second attempt \(pause) after the first, despite Retry-After: 1")
        #expect(pause < .seconds(6), "second attempt only \(pause) after the first")
        #expect(upstream.requests.map(\.attempt) == [1, 2])
        #expect(try outbox.operation(queued.id).string("status") == "completed")
    }

    @Test(arguments: TestStore.both) func alwaysUnavailableFailsAfterOnePlusMaxRetriesAttempts(store: TestStore) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("down", status: 503)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(
            retry: #""maxRetries": 2, "baseDelaySeconds": 0.05, "multiplier": 1, "jitter": false"#), store: store)

        let queued = try outbox.enqueue(body: "doomed", headers: [HeaderField("Outbox-Mode", "queue")])
        let failed = try await outbox.waitForOperation(queued.id, toBe: ["failed", "completed", "conflict"])
        try outbox.drain()

        #expect(failed.string("status") == "failed", "\(failed)")
        #expect(failed.string("lastError")?.isEmpty == false, "a failed operation without lastError: \(failed)")
        #expect(failed.int("maxRetries") == 2, "\(failed)")
        #expect(upstream.requests.map(\.attempt) == [1, 2, 3], "\(upstream.requests.map(\.attempt))\n\(outbox)")
    }
}

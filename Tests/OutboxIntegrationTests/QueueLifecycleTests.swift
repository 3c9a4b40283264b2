import Foundation
import Testing

/// The ends of an operation's life and the probes that decide when replay starts:
/// TTL expiry, removal after `completedRetentionSeconds`, `GET probePath` probes, and a
/// drain that cannot finish.
@Suite("Queue: lifecycle and probes", .harnessThreads)
struct QueueLifecycleTests {
    @Test(arguments: TestStore.both) func unfinishedOperationOlderThanTheTTLFailsAsExpired(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(
            queue: #""ttlSeconds": 0.3"#), store: store)
        let queued = try outbox.enqueue(body: "too late")
        let expired = try await outbox.waitForOperation(queued.id, toBe: ["failed"])
        #expect(expired.string("lastError") == "expired", "\(expired)")
        try upstream.restart()
        // Nothing is left to deliver: the drain is immediate and the upstream sees nothing.
        try outbox.drain()
        #expect(upstream.requests.isEmpty)
    }

    /// Through the binary, the removal: real time cannot show that the operation stayed for the
    /// whole period (a descheduled test may look after it), so that half, with the stored
    /// response answered until the period ends, is `QueueRetentionTests` on the queue's clock.
    @Test(arguments: TestStore.both) func completedOperationIsRemovedAfterTheRetentionPeriod(store: TestStore) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("stored", status: 201)) }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(
            queue: #""completedRetentionSeconds": 0.5"#), store: store)
        let queued = try outbox.enqueue(body: "keep me briefly", headers: [HeaderField("Idempotency-Key", "retained-1")])
        try upstream.restart()
        try outbox.drain()
        #expect(upstream.requests.count == 1, "\(upstream.requests)")
        // Then gone: the maintenance pass logs the removal, after which the admin API answers 404.
        try await outbox.waitForLog(containing: "retention_removed", timeout: .seconds(10))
        let status = try outbox.admin("operations/\(queued.id)").status
        #expect(status == 404, "the completed operation outlived completedRetentionSeconds\n\(outbox)")
    }

    @Test(arguments: TestStore.both) func drainAnswers504WhileTheUpstreamStaysDown(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        _ = try outbox.enqueue(body: "stuck")
        let started = ContinuousClock.now
        let response = try outbox.admin("drain?timeoutSeconds=0.5")
        #expect(response.status == 504, "\(response)")
        #expect(response.bodyText.contains(#""drained":false"#), "\(response)")
        #expect(ContinuousClock.now - started >= .milliseconds(450))
    }

    @Test(arguments: TestStore.both) func probePathMustAnswerBelow500BeforeReplayStarts(store: TestStore) async throws {
        let healthy = Gate()
        let upstream = try TestUpstream { request in
            if request.target == "/health" {
                // Sick until the test opens the gate: the origin accepts connections but is not ready.
                return healthy.isOpen ? .respond(.text("ok")) : .respond(.text("starting", status: 503))
            }
            return .respond(.text("stored", status: 201))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"reachability": {"probeIntervalSeconds": 0.1, "probePath": "/health"}, "retry": {"preset": "immediate"}}
            """, store: store)
        let queued = try outbox.enqueue(body: "after health")
        try upstream.restart()
        // TCP connects now succeed, but the probe path says 503: several probes, no delivery.
        _ = try await upstream.waitForRequests(3)
        #expect(upstream.requests.allSatisfy { $0.target == "/health" }, "\(upstream.requests.map(\.target))")
        #expect(try outbox.operation(queued.id).string("status") == "pending")
        healthy.open()
        let done = try await outbox.waitForOperation(queued.id, toBe: ["completed"])
        #expect(done.string("status") == "completed")
        #expect(upstream.requests.contains { $0.target == "/items" && $0.method == "POST" })
    }
}

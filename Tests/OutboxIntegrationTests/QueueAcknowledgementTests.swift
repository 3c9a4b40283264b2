import Foundation
import Testing

/// What a client is told when its request meets an unreachable origin: a write is
/// stored and answered `202` with the operation's id and key; a read gets `503` with
/// `Retry-After`; `Outbox-Mode: queue` stores a write even while the origin answers.
@Suite("Queue: acknowledgement", .harnessThreads)
struct QueueAcknowledgementTests {
    /// Lowercase 8-4-4-4-12 hex: one spelling per id, so clients can compare ids as strings.
    static func isLowercaseUUID(_ text: String) -> Bool {
        let groups = text.split(separator: "-", omittingEmptySubsequences: false)
        return groups.map(\.count) == [8, 4, 4, 4, 12]
            && groups.allSatisfy { $0.allSatisfy { "0123456789abcdef".contains($0) } }
    }

    @Test(arguments: TestStore.both) func writeToDownUpstreamIsAcceptedWithOperationIdKeyAndLocation(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        let response = try outbox.send("POST", "/items", body: #"{"name":"a"}"#,
                                       headers: [HeaderField("Content-Type", "application/json")])
        #expect(response.status == 202, "\(response)\n\(outbox)")
        #expect(response.headers["Content-Type"]?.lowercased().hasPrefix("application/json") == true, "\(response)")
        let id = try #require(response.headers["Outbox-Operation-Id"], "no Outbox-Operation-Id\n\(response)")
        let key = try #require(response.headers["Idempotency-Key"], "no Idempotency-Key\n\(response)")
        #expect(Self.isLowercaseUUID(id), "id \(id) is not a lowercase UUID")
        #expect(!key.isEmpty)
        #expect(response.headers["Location"] == "/admin/operations/\(id)", "\(response)")

        let body = try JSONObject(response)
        #expect(body.string("id") == id, "\(body)")
        #expect(body.string("status") == "pending", "\(body)")
        #expect(body.string("idempotencyKey") == key, "\(body)")
        let queuedAt = try #require(body.string("queuedAt"), "no queuedAt: \(body)")
        let parsed = ISO8601DateFormatter().date(from: queuedAt)
            ?? { let f = ISO8601DateFormatter(); f.formatOptions.insert(.withFractionalSeconds); return f.date(from: queuedAt) }()
        let queuedDate = try #require(parsed, "queuedAt \(queuedAt) is not ISO 8601")
        #expect(abs(queuedDate.timeIntervalSinceNow) < 60, "queuedAt \(queuedAt) is not about now")

        // The Location resolves to the operation in the admin API.
        let detail = try outbox.operation(id)
        #expect(detail.string("id") == id && detail.string("idempotencyKey") == key, "\(detail)")
        #expect(detail.string("method") == "POST", "\(detail)")
    }

    @Test(arguments: TestStore.both) func clientIdempotencyKeyIsKeptAndEchoed(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        let key = "client-key-\(UUID().uuidString)"

        let queued = try outbox.enqueue(body: "x", headers: [HeaderField("Idempotency-Key", key)])
        #expect(queued.idempotencyKey == key, "\(queued.response)")
        #expect(queued.body.string("idempotencyKey") == key, "\(queued.body)")
        #expect(try outbox.operation(queued.id).string("idempotencyKey") == key)
    }

    @Test(arguments: TestStore.both) func twoWritesGetDistinctIdsAndKeys(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        let first = try outbox.enqueue(body: "one")
        let second = try outbox.enqueue(body: "two")
        #expect(first.id != second.id)
        #expect(first.idempotencyKey != second.idempotencyKey)
    }

    @Test(arguments: TestStore.both) func readFromDownUpstreamGetsServiceUnavailableWithRetryAfterAndIsNotStored(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        let response = try outbox.send("GET", "/items")
        expectErrorResponse(response, status: 503, from: outbox)
        let retryAfter = try #require(response.headers["Retry-After"], "503 without Retry-After\n\(response)")
        #expect(UInt(retryAfter) != nil, "Retry-After: \(retryAfter) is not delay-seconds")

        let status = try JSONObject(outbox.admin("status"))
        #expect(status.object("counts")?.int("pending") == 0, "a GET was stored: \(status)")
    }

    @Test(arguments: TestStore.both) func queueModeStoresWhileUpstreamIsUpThenDeliversWithoutControlHeaders(store: TestStore) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        let queued = try outbox.enqueue(body: "fire-and-forget", headers: [
            HeaderField("Outbox-Mode", "queue"), HeaderField("Outbox-Tag", "batch-7"),
            HeaderField("Outbox-Priority", "high"), HeaderField("X-Kept", "yes"),
        ])
        let done = try await outbox.waitForOperation(queued.id, toBe: ["completed", "failed", "conflict"])
        #expect(done.string("status") == "completed", "\(done)")
        #expect(done.string("tag") == "batch-7", "\(done)")

        let received = try await upstream.waitForRequests(1)
        #expect(received.count == 1, "\(received)")
        let delivery = try #require(received.first)
        #expect(delivery.method == "POST" && delivery.target == "/items", "\(delivery)")
        #expect(delivery.bodyText == "fire-and-forget")
        #expect(delivery.idempotencyKey == queued.idempotencyKey, "\(delivery)")
        #expect(delivery.attempt == 1, "\(delivery)")
        #expect(delivery.headers["X-Kept"] == "yes", "\(delivery)")
        #expect(delivery.leakedControlHeaders.isEmpty, "control headers reached the upstream: \(delivery)")
    }
}

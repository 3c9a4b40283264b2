import Foundation
@testable import OutboxConfig
import OutboxHTTP
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxTelemetry
import Testing

/// `completedRetentionSeconds` on the queue's own clock (`maintain(now:)`): a completed
/// operation stays, with its stored response, until the period after its last attempt has
/// passed, and goes at the first maintenance after it. The integration test checks the same
/// through the binary, where real time cannot say how long the test was descheduled.
@Suite("Queue: retention of completed operations")
struct QueueRetentionTests {
    static let attemptedAt: Int64 = 1_700_000_100_000

    @Test func aCompletedOperationStaysForTheRetentionPeriodAndGoesAtTheFirstMaintenanceAfter() async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        var config = OutboxConfig()
        config.dataDirectory = directory.logPath
        config.queue.completedRetentionSeconds = 3
        let queue = try OutboxQueue(config: config, reachability: Reachability(probeIntervalSeconds: 1, probe: { _ in true }),
                                    logger: lines.logger, metrics: Metrics())
        defer { queue.close() }
        let stored = try await QueueEnqueueTests.enqueue(StorageSamples.request(1, bodySize: 20), into: queue).get()
        let response = StoredResponse(status: 201, headers: HTTPHeaders([("Content-Type", "text/plain")]), body: Array("stored".utf8))
        await queue.record(stored.id, OperationState(status: .completed, lastAttemptAt: Self.attemptedAt, response: response, attempts: 1))

        for now in [Self.attemptedAt, Self.attemptedAt + 2_999, Self.attemptedAt + 3_000] {
            await queue.maintain(now: now)
            let kept = queue.detail(stored.id)?.0
            #expect(kept?.state.status == .completed, "removed at \(now - Self.attemptedAt) ms of 3 000")
            #expect(kept?.state.response?.body == Array("stored".utf8))
        }
        #expect(lines.containing("retention_removed").isEmpty, "\(lines.all)")

        await queue.maintain(now: Self.attemptedAt + 3_001)
        #expect(queue.detail(stored.id) == nil, "kept after its retention period")
        #expect(lines.containing("retention_removed").first?.contains("operations=1") == true, "\(lines.all)")
    }
}

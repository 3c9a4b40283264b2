import Foundation
@testable import OutboxConfig
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxStorage
@testable import OutboxTelemetry
import Testing

/// Compaction driven by the queue on a real log with small segments: what the queue removes
/// or supersedes is given back to the disk by its periodic maintenance, before and after a
/// restart, and what it still holds reads back whole.
@Suite("Queue: compaction")
struct QueueCompactionTests {
    static let logOptions = OperationLog.Options(segmentBytes: 4096)
    /// A minute after the sample requests were made: nothing is due for the TTL sweep.
    static let now: Int64 = 1_700_000_060_000

    static func open(_ directory: StorageTestDirectory, lines: StorageLogLines) throws -> OutboxQueue {
        var config = OutboxConfig()
        config.dataDirectory = directory.logPath
        return try OutboxQueue(config: config, reachability: Reachability(probeIntervalSeconds: 1, probe: { _ in true }),
                               logger: lines.logger, metrics: Metrics(), logOptions: logOptions)
    }

    /// 40 operations with 300-byte bodies over several segments, every tenth kept (by id, the
    /// request stored) and given two later states, so its first state record is superseded.
    static func fill(_ queue: OutboxQueue) async throws -> [UUID: OperationRequest] {
        var kept: [UUID: OperationRequest] = [:]
        for n in 0..<40 {
            let request = StorageSamples.request(n, bodySize: 300)
            let stored = try await QueueEnqueueTests.enqueue(request, into: queue).get()
            if n % 10 == 0 { kept[stored.id] = request }
        }
        for id in kept.keys {
            await queue.record(id, OperationState(status: .pending, retryCount: 1, lastError: "HTTP 503"))
            await queue.record(id, OperationState(status: .pending, retryCount: 2, lastError: "HTTP 503"))
        }
        return kept
    }

    static func ids(in queue: OutboxQueue) -> Set<UUID> {
        Set(queue.list(status: nil, tag: nil, origin: nil, orderingKey: nil, after: nil, limit: 1000).items.map(\.id))
    }

    static func deleteAllBut(_ kept: [UUID: OperationRequest], in queue: OutboxQueue) async {
        for id in ids(in: queue) where kept[id] == nil { await queue.delete(id) }
    }

    /// Every kept operation reads back: its request whole, its latest state.
    static func expectWhole(_ kept: [UUID: OperationRequest], in queue: OutboxQueue) {
        #expect(ids(in: queue) == Set(kept.keys))
        for (id, request) in kept {
            let detail = queue.detail(id)
            #expect(detail?.1.body == request.body)
            #expect(detail?.1.headers == request.headers)
            #expect(detail?.0.state.retryCount == 2)
        }
    }

    /// With `restartFirst`, what was deleted before the restart is found dead again as the
    /// records replay.
    @Test(arguments: [false, true])
    func maintenanceGivesBackWhatTheQueueNoLongerNeeds(restartFirst: Bool) async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        var queue = try Self.open(directory, lines: lines)
        let kept = try await Self.fill(queue)
        await Self.deleteAllBut(kept, in: queue)
        let before = queue.storageBytes
        if restartFirst {
            queue.close()
            queue = try Self.open(directory, lines: lines)
        }

        await queue.maintain(now: Self.now)
        #expect(queue.storageBytes * 3 < before, "\(queue.storageBytes) bytes of \(before) left")
        #expect(!lines.containing("storage_segment_removed").isEmpty)
        Self.expectWhole(kept, in: queue)
        queue.close()

        let reopened = try Self.open(directory, lines: lines)
        defer { reopened.close() }
        Self.expectWhole(kept, in: reopened)
    }

    /// A queue of pending operations has nothing dead: maintenance leaves every segment as it is.
    @Test func nothingDeadNothingRewritten() async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        let queue = try Self.open(directory, lines: lines)
        defer { queue.close() }
        for n in 0..<40 { _ = try await QueueEnqueueTests.enqueue(StorageSamples.request(n, bodySize: 300), into: queue).get() }
        let files = try directory.fileNames()
        await queue.maintain(now: Self.now)
        let after = try directory.fileNames()
        #expect(after == files, "\(after) after \(files)")
        #expect(lines.containing("storage_segment").isEmpty)
    }
}

import Foundation
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxStorage
import Testing

/// A state written behind the lane's back tells the lane when its record is on disk, and a
/// write that fails tells it too: a lane waiting for room in its window is never held forever.
@Suite("Queue: write-behind confirmations")
struct QueueRecordSoonTests {
    static func recordSoon(_ id: UUID, _ state: OperationState, into queue: OutboxQueue) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.recordSoon(id, state, written: { continuation.resume() })
        }
    }

    @Test func theConfirmationComesOnceTheStateIsOnDisk() async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        let queue = try QueueEnqueueTests.open(directory, lines: lines)
        let request = StorageSamples.request(1)
        let stored = try await QueueEnqueueTests.enqueue(request, into: queue).get()
        var completed = OperationState()
        completed.status = .completed

        await Self.recordSoon(stored.id, completed, into: queue)
        // Reopened without closing the first queue: only what is on disk counts.
        let reopened = try QueueEnqueueTests.open(directory, lines: lines)
        defer { reopened.close() }
        #expect(reopened.counts[.completed] == 1, "the confirmed state is not what a restart finds")
        queue.close()
    }

    @Test func aWriteThatFails_StillConfirms_AndIsLogged() async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        let queue = try QueueEnqueueTests.open(directory, lines: lines)
        let stored = try await QueueEnqueueTests.enqueue(StorageSamples.request(1), into: queue).get()
        queue.close()
        var completed = OperationState()
        completed.status = .completed

        await Self.recordSoon(stored.id, completed, into: queue)
        #expect(!lines.containing("storage_failed").isEmpty, "\(lines.all)")
    }
}

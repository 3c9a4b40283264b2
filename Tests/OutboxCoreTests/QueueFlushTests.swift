import Foundation
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxStorage
import Testing

/// A flush on a real log: the cleared schedule is stored with the rest of the state as it was,
/// the error the index cut short included, and only operations that were waiting change.
@Suite("Queue: flush")
struct QueueFlushTests {
    @Test(arguments: [8, 400])
    func aFlushStoresTheClearedScheduleAndKeepsTheWholeState(errorLength: Int) async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        let queue = try QueueEnqueueTests.open(directory, lines: lines)
        let waiting = try await QueueEnqueueTests.enqueue(StorageSamples.request(1), into: queue).get()
        let untouched = try await QueueEnqueueTests.enqueue(StorageSamples.request(2), into: queue).get()
        let error = String(repeating: "e", count: errorLength)
        let backoff = OperationState(status: .pending, retryCount: 2, lastAttemptAt: 1_700_000_000_000,
                                     nextAttemptAt: 4_000_000_000_000, lastError: error)
        await queue.record(waiting.id, backoff)
        let bytesBefore = queue.storageBytes

        await queue.flush()
        #expect(queue.storageBytes > bytesBefore, "the flush wrote nothing")
        queue.close()

        let (log, recovered) = try OperationLog.open(directory: directory.logPath, options: .init(), logger: lines.logger)
        defer { log.close() }
        let states = Dictionary(uniqueKeysWithValues: recovered.map { ($0.operation.id, $0.operation.state) })
        var cleared = backoff
        cleared.nextAttemptAt = nil
        #expect(states[waiting.id] == cleared)
        #expect(states[untouched.id] == OperationState())
    }
}

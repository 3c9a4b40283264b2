import Foundation
@testable import OutboxConfig
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxStorage
@testable import OutboxTelemetry
import Testing

/// A flush on a real log: the cleared schedule is stored with the rest of the state as it was,
/// the error the index cut short included, and only operations that were waiting change.
@Suite("Queue: flush")
struct QueueFlushTests {
    @Test(arguments: [8, 400])
    func aFlushStoresTheClearedScheduleAndKeepsTheWholeState(errorLength: Int) async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        // Without zeros written ahead, the log's files grow with every record it writes.
        let queue = try QueueEnqueueTests.open(directory, lines: lines, logOptions: .init(zeroAheadBytes: 0))
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

    /// The replayer's step gives the index a backoff, then appends it. A flush that comes in
    /// between (here: from the step's own event, published between the two) clears the backoff
    /// the index now holds; on disk, the cleared state must come last, or a restart brings the
    /// backoff back.
    @Test func aFlushBetweenTheReplayersStepAndItsWrite_LeavesTheClearedScheduleLastOnDisk() async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        var config = OutboxConfig()
        config.dataDirectory = directory.logPath
        let hub = EventHub()
        let queue = try OutboxQueue(config: config, reachability: Reachability(probeIntervalSeconds: 1, probe: { _ in true }),
                                    logger: lines.logger, metrics: Metrics(), events: hub)
        let stored = try await QueueEnqueueTests.enqueue(StorageSamples.request(1), into: queue).get()
        let backoff = OperationState(status: .pending, retryCount: 1, lastAttemptAt: 1_700_000_000_000,
                                     nextAttemptAt: 4_000_000_000_000, lastError: "HTTP 503")

        let armed = StorageShared(true)
        let flushed = DispatchSemaphore(value: 0)
        let flushedInTime = StorageShared(false)
        let subscription = hub.subscribe(lastEventID: nil) {
            guard armed.withLock({ armed in defer { armed = false }; return armed }) else { return }
            Task {
                await queue.flush()
                flushed.signal()
            }
            // Holds the step where its event is published until the flush is done.
            let done = flushed.wait(timeout: .now() + 30) == .success
            flushedInTime.withLock { $0 = done }
        }
        // On a thread of its own, as the replayer's step is not on Swift's pool: it blocks above.
        // Done once the step has returned (its event handled) and its record is on disk.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread {
                let written = DispatchSemaphore(value: 0)
                queue.recordSoon(stored.id, backoff, replaying: stored.origin, written: { written.signal() })
                written.wait()
                continuation.resume()
            }.start()
        }
        withExtendedLifetime(subscription) {}
        #expect(!armed.value, "the step published no event")
        #expect(flushedInTime.value, "the flush did not finish")
        queue.close()

        let (log, recovered) = try OperationLog.open(directory: directory.logPath, options: .init(), logger: lines.logger)
        defer { log.close() }
        let state = recovered.first { $0.operation.id == stored.id }?.operation.state
        var cleared = backoff
        cleared.nextAttemptAt = nil
        #expect(state == cleared, "a restart finds \(String(describing: state))")
    }
}

import Foundation
@testable import OutboxHTTP
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

/// The replayer's own steps: the queue leaves the replayed origin to its replayer but still
/// wakes another origin whose operation the step unblocked, and once the record is on disk the
/// operation's stored response is read back from it (only the locator moved).
@Suite("Queue: the replayer's own state changes")
struct QueueReplayStepTests {
    /// Reports every kick, in order.
    final class KickSpy: LaneWaker {
        let kicks: AsyncStream<Origin>
        private let continuation: AsyncStream<Origin>.Continuation
        init() { (kicks, continuation) = AsyncStream.makeStream(of: Origin.self) }
        func startAll() async {}
        func kick(_ origin: Origin) async { continuation.yield(origin) }
        func kickAll() async {}
    }

    @Test func aStepWakesTheOriginItUnblocked_AndTheResponseIsReadFromDiskOnceWritten() async throws {
        let directory = try StorageTestDirectory()
        let queue = try QueueEnqueueTests.open(directory, lines: StorageLogLines())
        defer { queue.close() }
        let spy = KickSpy()
        queue.attach(spy)
        var kicks = spy.kicks.makeAsyncIterator()
        let replayed = StorageSamples.request(1)
        var waiting = StorageSamples.request(2)
        let other = Origin(scheme: .http, host: "other.example.test", port: 8080)
        waiting.origin = other
        waiting.dependsOn = replayed.id
        _ = try await QueueEnqueueTests.enqueue(replayed, into: queue).get()
        _ = try await QueueEnqueueTests.enqueue(waiting, into: queue).get()
        // Each enqueue kicks its own origin.
        var enqueueKicks: Set<Origin> = []
        while enqueueKicks.count < 2, let origin = await kicks.next() { enqueueKicks.insert(origin) }
        #expect(queue.takeWork(for: other, now: .max).isIdle, "the dependent waits for its dependency")
        #expect(!queue.hasWork(for: other, now: .max))
        #expect(queue.hasWork(for: replayed.origin, now: .max))

        var inProgress = OperationState()
        inProgress.status = .inProgress
        queue.recordSoon(replayed.id, inProgress, replaying: replayed.origin, written: {})
        #expect(!queue.hasWork(for: replayed.origin, now: .max), "its one lane is in flight")
        var completed = OperationState()
        completed.status = .completed
        completed.response = StoredResponse(status: 201, headers: HTTPHeaders([("Content-Type", "text/plain")]),
                                            body: Array("made".utf8))
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.recordSoon(replayed.id, completed, replaying: replayed.origin, written: { continuation.resume() })
        }
        var woken: Origin?
        while woken != other, let origin = await kicks.next() { woken = origin }
        #expect(woken == other, "the unblocked origin is woken")
        #expect(queue.hasWork(for: other, now: .max))
        let detail = try #require(queue.detail(replayed.id))
        #expect(detail.0.state.status == .completed)
        #expect(detail.0.state.response?.body == Array("made".utf8), "the response is read back from its record")
    }
}

private extension ReplayWork {
    var isIdle: Bool {
        if case .idle = self { return true }
        return false
    }
}

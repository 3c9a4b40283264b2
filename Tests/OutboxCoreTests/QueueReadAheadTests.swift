import Foundation
@testable import OutboxModel
@testable import OutboxQueue
import Testing

/// The queue reads ahead the request a lane delivers next while its current attempt is in
/// flight. That read is only a guess: what the lane delivers, and in which order, is still
/// the queue's choice at the moment it is asked, and what it hands out is the stored request.
@Suite("Queue: reading the next request ahead")
struct QueueReadAheadTests {
    static func state(_ status: OperationStatus) -> OperationState {
        var state = OperationState()
        state.status = status
        return state
    }

    /// Takes the origin's next work (in progress from then on), as the replayer does.
    static func take(from queue: OutboxQueue) throws -> (UUID, OperationRequest) {
        guard case .attempt(let attempt) = queue.takeWork(for: StorageSamples.origin, now: 0) else {
            Issue.record("no attempt offered")
            throw CancellationError()
        }
        return (attempt.id, attempt.request)
    }

    @Test func aHigherPriorityWriteArrivingAfterTheReadAheadStillGoesFirst_AndEachRequestIsTheStoredOne() async throws {
        let directory = try StorageTestDirectory()
        let queue = try QueueEnqueueTests.open(directory, lines: StorageLogLines())
        defer { queue.close() }
        let first = StorageSamples.request(1)
        let second = StorageSamples.request(2, bodySize: 3000)
        _ = try await QueueEnqueueTests.enqueue(first, into: queue).get()
        _ = try await QueueEnqueueTests.enqueue(second, into: queue).get()

        let (sent, sentRequest) = try Self.take(from: queue)
        #expect(sent == first.id)
        #expect(sentRequest == first)
        // While `first` is in flight: the lane's next is `second`, read now.
        queue.readAhead(after: sent)
        var urgent = StorageSamples.request(3)
        urgent.priority = .high
        _ = try await QueueEnqueueTests.enqueue(urgent, into: queue).get()
        queue.recordSoon(sent, Self.state(.completed))

        let (next, nextRequest) = try Self.take(from: queue)
        #expect(next == urgent.id, "the read-ahead operation overtook a higher-priority one")
        #expect(nextRequest == urgent)
        queue.readAhead(after: next)
        queue.recordSoon(next, Self.state(.completed))

        let (last, lastRequest) = try Self.take(from: queue)
        #expect(last == second.id)
        #expect(lastRequest == second, "the request read ahead differs from the stored one")
        queue.recordSoon(last, Self.state(.completed))
        guard case .idle = queue.takeWork(for: StorageSamples.origin, now: 0) else {
            Issue.record("work left after the three operations")
            return
        }
    }

    @Test func aReadAheadOperationDeletedMeanwhileIsNeverDelivered() async throws {
        let directory = try StorageTestDirectory()
        let queue = try QueueEnqueueTests.open(directory, lines: StorageLogLines())
        defer { queue.close() }
        let requests = (1...3).map { StorageSamples.request($0) }
        for request in requests { _ = try await QueueEnqueueTests.enqueue(request, into: queue).get() }

        let (sent, _) = try Self.take(from: queue)
        queue.readAhead(after: sent)
        #expect(await queue.delete(requests[1].id))
        queue.recordSoon(sent, Self.state(.completed))

        let (next, nextRequest) = try Self.take(from: queue)
        #expect(next == requests[2].id, "a deleted operation was delivered from the read-ahead")
        #expect(nextRequest == requests[2])
    }
}

/// An attempt's `inProgress` state is the queue's at once (the lane is busy, the admin API shows
/// it); the log gets it only as the attempt's mark: a restart finds the operation pending, sends
/// it again, and numbers that attempt past the one it may have made.
@Suite("Queue: an attempt in flight")
struct QueueInFlightTests {
    @Test func theLaneIsBusyAndTheStatusShown_ButARestartFindsItPendingAndCountsTheAttempt() async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        let queue = try QueueEnqueueTests.open(directory, lines: lines)
        defer { queue.close() }
        let first = StorageSamples.request(1)
        let second = StorageSamples.request(2)
        _ = try await QueueEnqueueTests.enqueue(first, into: queue).get()
        _ = try await QueueEnqueueTests.enqueue(second, into: queue).get()
        guard case .attempt(let attempt) = queue.takeWork(for: StorageSamples.origin, now: 5) else {
            Issue.record("no attempt offered")
            return
        }
        let id = attempt.id
        #expect(attempt.number == 1)
        #expect(await attempt.mark?.written() ?? true, "the attempt's mark is written before it may be sent")

        #expect(queue.counts[.inProgress] == 1)
        #expect(queue.detail(id)?.0.state.status == .inProgress)
        guard case .idle = queue.takeWork(for: StorageSamples.origin, now: 0) else {
            Issue.record("the lane offered a second operation while one is in flight")
            return
        }
        // A later state is written as usual, and is what the restart below finds for `second`.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.recordSoon(second.id, QueueReadAheadTests.state(.failed), written: { continuation.resume() })
        }
        // Reopened without closing the first queue: only what is on disk counts.
        let reopened = try QueueEnqueueTests.open(directory, lines: lines)
        defer { reopened.close() }
        #expect(reopened.counts[.pending] == 1, "the in-flight operation is not pending after a restart")
        #expect(reopened.counts[.inProgress] == 0)
        #expect(reopened.counts[.failed] == 1)
        guard case .attempt(let again) = reopened.takeWork(for: StorageSamples.origin, now: 10) else {
            Issue.record("the operation in flight at the crash is not offered again")
            return
        }
        #expect(again.id == id)
        #expect(again.number == 2, "a resend after a crash carries a higher attempt number")
    }
}

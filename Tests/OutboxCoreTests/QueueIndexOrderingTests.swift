import Foundation
@testable import OutboxModel
@testable import OutboxQueue
import Testing

@Suite("Queue index: lane ordering, backoff and queue-behind")
struct QueueIndexOrderingTests {
    typealias F = QueueIndexFixture

    @Test("higher priority goes first, FIFO within a priority")
    func priorityThenFIFO() throws {
        var index = QueueIndex<Int>()
        let priorities: [OperationPriority] = [.normal, .low, .high, .critical, .normal, .high, .low, .critical]
        for (n, priority) in priorities.enumerated() { try F.insert(&index, n, priority: priority) }
        #expect(try F.drain(&index) == [3, 7, 2, 5, 0, 4, 1, 6])
    }

    @Test("an unknown or empty lane is idle")
    func emptyLaneIsIdle() throws {
        var index = QueueIndex<Int>()
        #expect(index.nextReady(origin: F.originA, now: 0) == LaneStep(next: .idle))
        try F.insert(&index, 1, state: OperationState(status: .completed))
        #expect(index.nextReady(origin: F.originA, now: 0) == LaneStep(next: .idle))
    }

    @Test("the lane delivers one at a time: busy while an operation is in progress")
    func oneAtATime() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1)
        try F.insert(&index, 2)
        try F.setStatus(&index, 1, .inProgress)
        #expect(index.nextReady(origin: F.originA, now: 0).next == .busy)
        try F.setStatus(&index, 1, .failed)
        #expect(index.nextReady(origin: F.originA, now: 0).next == .deliver(F.id(2)))
    }

    @Test("a backing-off head makes the lane wait; later operations do not overtake it")
    func backoffHeadWaits() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1)
        try F.insert(&index, 2)
        try F.setStatus(&index, 1, .pending, nextAttemptAt: 5_000)
        #expect(index.nextReady(origin: F.originA, now: 4_999).next == .wait(until: 5_000))
        #expect(index.nextReady(origin: F.originA, now: 5_000).next == .deliver(F.id(1)))
    }

    @Test("a higher-priority arrival is delivered while a lower-priority head backs off")
    func higherPriorityPassesBackoff() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, state: OperationState(nextAttemptAt: 5_000))
        try F.insert(&index, 2, priority: .high)
        #expect(index.nextReady(origin: F.originA, now: 0).next == .deliver(F.id(2)))
    }

    @Test("origins have independent lanes")
    func originsAreIndependent() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, origin: F.originA)
        try F.insert(&index, 2, origin: F.originB)
        try F.setStatus(&index, 1, .inProgress)
        #expect(index.nextReady(origin: F.originA, now: 0).next == .busy)
        #expect(index.nextReady(origin: F.originB, now: 0).next == .deliver(F.id(2)))
    }

    @Test("queue-behind: an origin has queued work while anything is pending or in progress")
    func hasQueued() throws {
        var index = QueueIndex<Int>()
        #expect(!index.hasQueued(origin: F.originA))
        try F.insert(&index, 1)
        #expect(index.hasQueued(origin: F.originA))
        #expect(!index.hasQueued(origin: F.originB))
        try F.setStatus(&index, 1, .inProgress)
        #expect(index.hasQueued(origin: F.originA))
        try F.setStatus(&index, 1, .conflict)
        #expect(!index.hasQueued(origin: F.originA))
        try F.setStatus(&index, 1, .pending)
        #expect(index.hasQueued(origin: F.originA))
        index.remove(F.id(1))
        #expect(!index.hasQueued(origin: F.originA))
    }

    @Test("an operation put back to pending rejoins its lane at its creation-order place")
    func retriedOperationKeepsItsPlace() throws {
        var index = QueueIndex<Int>()
        for n in 1...3 { try F.insert(&index, n) }
        try F.setStatus(&index, 1, .failed)
        #expect(index.nextReady(origin: F.originA, now: 0).next == .deliver(F.id(2)))
        try F.setStatus(&index, 1, .pending)
        #expect(try F.drain(&index) == [1, 2, 3])
    }

    @Test("changes mark the affected lanes to wake, once")
    func lanesToWake() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, origin: F.originB)
        try F.insert(&index, 2, origin: F.originA)
        try F.insert(&index, 3, origin: F.originB)
        #expect(index.takeLanesToWake() == [F.originB, F.originA])
        #expect(index.takeLanesToWake().isEmpty)
    }
}

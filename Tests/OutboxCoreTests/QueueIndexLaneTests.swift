import Foundation
@testable import OutboxModel
@testable import OutboxQueue
import Testing

/// Lanes within an origin (an ordering key each, plus the default lane): which lane goes
/// next, what may run at the same time, and what a lane's backoff or backlog does to the others.
@Suite("Queue index: lanes of one origin")
struct QueueIndexLaneTests {
    typealias F = QueueIndexFixture

    /// Starts what the origin names next, at `now`; returns its number, nil when nothing may go.
    static func start(_ index: inout QueueIndex<Int>, now: Int64 = 0) throws -> Int? {
        guard case .deliver(let id) = index.nextReady(origin: F.originA, now: now).next else { return nil }
        try index.update(id, state: OperationState(status: .inProgress))
        return F.number(id)
    }

    /// Delivers the origin one operation at a time (each completes before the next starts)
    /// and returns the operation numbers in delivery order.
    static func deliverOneByOne(_ index: inout QueueIndex<Int>, now: Int64 = 0) throws -> [Int] {
        var order: [Int] = []
        while let n = try start(&index, now: now) {
            try F.setStatus(&index, n, .completed)
            order.append(n)
        }
        return order
    }

    @Test("lanes of one origin are in flight at the same time, each one operation at a time")
    func lanesRunConcurrently() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, orderingKey: "a")
        try F.insert(&index, 2, orderingKey: "a")
        try F.insert(&index, 3, orderingKey: "b")
        try F.insert(&index, 4)
        #expect(try Self.start(&index) == 1)
        #expect(try Self.start(&index) == 3, "lane b waits for lane a")
        #expect(try Self.start(&index) == 4, "the default lane waits for keyed lanes")
        #expect(index.nextReady(origin: F.originA, now: 0).next == .busy, "a second operation of lane a started")
        #expect(index.activeLanes(origin: F.originA) == 3)
        try F.setStatus(&index, 1, .completed)
        #expect(index.activeLanes(origin: F.originA) == 2)
        #expect(try Self.start(&index) == 2)
    }

    @Test("within a lane: priority first, FIFO within a priority; other lanes do not reorder it")
    func orderWithinALane() throws {
        var index = QueueIndex<Int>()
        let ops: [(OperationPriority, String?)] = [(.normal, "a"), (.low, "b"), (.high, "a"), (.normal, nil),
                                                   (.low, "a"), (.critical, "b"), (.normal, "a")]
        for (n, op) in ops.enumerated() { try F.insert(&index, n, priority: op.0, orderingKey: op.1) }
        let order = try Self.deliverOneByOne(&index)
        #expect(order.filter { [0, 2, 4, 6].contains($0) } == [2, 0, 6, 4])
        #expect(order.filter { [1, 5].contains($0) } == [5, 1])
        #expect(order.sorted() == Array(0..<7))
    }

    @Test("fairness: lanes take turns, so a long backlog delivers one per round and starves none")
    func roundRobin() throws {
        var index = QueueIndex<Int>()
        for n in 1...5 { try F.insert(&index, n, orderingKey: "long") }
        try F.insert(&index, 6, orderingKey: "b")
        try F.insert(&index, 7, orderingKey: "b")
        try F.insert(&index, 8, orderingKey: "c")
        #expect(try Self.deliverOneByOne(&index) == [1, 6, 8, 2, 7, 3, 4, 5])
    }

    @Test("a write joining a waiting lane's tail keeps that lane's turn")
    func tailWriteKeepsTurn() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, orderingKey: "a")
        try F.insert(&index, 2, orderingKey: "b")
        try F.insert(&index, 3, orderingKey: "a")
        try F.insert(&index, 4, orderingKey: "a")
        #expect(try Self.deliverOneByOne(&index) == [1, 2, 3, 4])
    }

    @Test("a lane whose head backs off waits alone: the other lanes go on, and it rejoins once due")
    func backoffBlocksOnlyItsLane() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, orderingKey: "a", state: OperationState(nextAttemptAt: 100))
        try F.insert(&index, 2, orderingKey: "a")
        for n in 3...5 { try F.insert(&index, n, orderingKey: "b") }
        #expect(try Self.start(&index, now: 0) == 3)
        #expect(index.nextReady(origin: F.originA, now: 0).next == .wait(until: 100), "lane a's head is not due")
        try F.setStatus(&index, 3, .completed)
        #expect(try Self.start(&index, now: 0) == 4)
        try F.setStatus(&index, 4, .completed)
        // At 150 lane a is due; lane b has been ready since its last attempt ended, before that.
        #expect(try Self.start(&index, now: 150) == 5)
        #expect(try Self.start(&index, now: 150) == 1, "the due lane runs beside the other")
        try F.setStatus(&index, 5, .completed)
        try F.setStatus(&index, 1, .completed)
        #expect(try Self.deliverOneByOne(&index, now: 150) == [2])
    }

    @Test("with every lane waiting, the origin waits until the earliest retry")
    func waitsForTheEarliestLane() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, orderingKey: "a", state: OperationState(nextAttemptAt: 700))
        try F.insert(&index, 2, orderingKey: "b", state: OperationState(nextAttemptAt: 300))
        #expect(index.nextReady(origin: F.originA, now: 0).next == .wait(until: 300))
        #expect(index.nextReady(origin: F.originA, now: 300).next == .deliver(F.id(2)))
        try F.setStatus(&index, 2, .inProgress)
        #expect(index.nextReady(origin: F.originA, now: 300).next == .wait(until: 700))
    }

    @Test("queue-behind is per lane: a queued key holds back only writes with that key")
    func hasQueuedPerLane() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, orderingKey: "a")
        #expect(index.hasQueued(origin: F.originA, orderingKey: "a"))
        #expect(!index.hasQueued(origin: F.originA, orderingKey: "b"))
        #expect(!index.hasQueued(origin: F.originA, orderingKey: nil))
        #expect(!index.hasQueued(origin: F.originB, orderingKey: "a"))
        #expect(index.hasQueued(origin: F.originA), "the origin as a whole has work")
        try F.insert(&index, 2)
        #expect(index.hasQueued(origin: F.originA, orderingKey: nil))
        try F.setStatus(&index, 1, .inProgress)
        #expect(index.hasQueued(origin: F.originA, orderingKey: "a"))
        try F.setStatus(&index, 1, .completed)
        #expect(!index.hasQueued(origin: F.originA, orderingKey: "a"))
    }

    @Test("dependsOn across lanes: the dependent waits for, or fails with, an operation in another lane")
    func dependencyAcrossLanes() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, orderingKey: "a", state: OperationState(nextAttemptAt: 500))
        try F.insert(&index, 2, dependsOn: 1, orderingKey: "b")
        try F.insert(&index, 3, orderingKey: "b")
        #expect(try Self.start(&index) == 3, "lane b goes on past its waiting operation")
        try F.setStatus(&index, 3, .completed)
        #expect(index.nextReady(origin: F.originA, now: 0).next == .wait(until: 500))
        #expect(try Self.start(&index, now: 500) == 1)
        #expect(index.nextReady(origin: F.originA, now: 500).next == .busy)
        try F.setStatus(&index, 1, .completed)
        #expect(try Self.start(&index, now: 500) == 2)

        try F.insert(&index, 4, orderingKey: "c")
        try F.insert(&index, 5, dependsOn: 4, orderingKey: "d")
        try F.setStatus(&index, 4, .failed)
        #expect(index.nextReady(origin: F.originA, now: 500).dependencyFailed == [F.id(5)])
    }

    @Test("entries carry their ordering key, and listings filter by it, alone or with the origin")
    func orderingKeyInEntriesAndFilter() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, orderingKey: "a")
        try F.insert(&index, 2)
        try F.insert(&index, 3, origin: F.originB, orderingKey: "a")
        try F.insert(&index, 4, orderingKey: "a", state: OperationState(status: .completed))
        #expect(index.entry(F.id(1))?.orderingKey == "a")
        #expect(index.entry(F.id(2))?.orderingKey == nil)
        let numbers = { (filter: QueueIndex<Int>.Filter) in index.list(filter, limit: 10).entries.map(\.locator) }
        #expect(numbers(.init(orderingKey: "a")) == [1, 3, 4])
        #expect(numbers(.init(origin: F.originA, orderingKey: "a")) == [1, 4])
        #expect(numbers(.init(status: .pending, orderingKey: "a")) == [1, 3])
        #expect(numbers(.init(orderingKey: "zzz")).isEmpty)
        #expect(numbers(.init(origin: F.originC, orderingKey: "a")).isEmpty)
    }

    @Test("a key's lane is released once its operations are gone, and the key starts afresh")
    func laneReleased() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, orderingKey: "once")
        try F.insert(&index, 2, orderingKey: "once")
        #expect(index.laneNumbers.count == 1)
        index.remove(F.id(1))
        #expect(index.laneNumbers.count == 1, "a member is left")
        index.remove(F.id(2))
        #expect(index.laneNumbers.isEmpty)
        let lanes = index.lanes.count
        try F.insert(&index, 3, orderingKey: "other")
        #expect(index.lanes.count == lanes, "the released lane is reused")
        #expect(index.entry(F.id(3))?.orderingKey == "other")
        #expect(try Self.deliverOneByOne(&index) == [3])
    }

    @Test("compaction keeps lanes, their order and what is in flight")
    func compactionKeepsLanes() throws {
        var index = QueueIndex<Int>()
        for n in 1...6 { try F.insert(&index, n, orderingKey: n % 2 == 0 ? "even" : "odd") }
        try F.insert(&index, 7, orderingKey: "gone")
        index.remove(F.id(7))
        try F.setStatus(&index, 1, .inProgress)
        index.compact()
        #expect(index.activeLanes(origin: F.originA) == 1)
        #expect(try Self.start(&index) == 2)
        #expect(index.nextReady(origin: F.originA, now: 0).next == .busy)
        try F.setStatus(&index, 1, .completed)
        try F.setStatus(&index, 2, .completed)
        #expect(try Self.deliverOneByOne(&index).sorted() == [3, 4, 5, 6])
    }

    /// 20 000 keys keep this to seconds in a debug build; a scan of the operations per step
    /// would make it take many minutes.
    @Test("twenty thousand keys: every lane gets its turn before any gets a second, and asking is cheap")
    func manyKeys() throws {
        var index = QueueIndex<Int>()
        let keys = 20_000
        for n in 0..<(2 * keys) { try F.insert(&index, n, orderingKey: "k\(n % keys)") }
        let clock = ContinuousClock()
        let started = clock.now
        var delivered = 0
        var firstsSeen = 0
        var secondBeforeAllFirsts = false
        while let n = try Self.start(&index) {
            try F.setStatus(&index, n, .completed)
            // Round-robin: every key's first operation goes before any key's second.
            if n < keys { firstsSeen += 1 } else if firstsSeen < keys { secondBeforeAllFirsts = true }
            delivered += 1
        }
        #expect(delivered == 2 * keys)
        #expect(!secondBeforeAllFirsts)
        #expect(clock.now - started < .seconds(60), "lane selection scans instead of stepping")
    }
}

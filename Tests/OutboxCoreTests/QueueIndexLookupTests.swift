import Foundation
@testable import OutboxModel
@testable import OutboxQueue
import Testing

@Suite("Queue index: lookups, counts, listing and sweeps")
struct QueueIndexLookupTests {
    typealias F = QueueIndexFixture

    @Test("operations are found by id and by exact idempotency key, in every key form", arguments: [
        "7b7c1a2e-0f8e-4c1a-9d3b-0123456789ab", "7B7C1A2E-0F8E-4C1A-9D3B-0123456789AB", "7b7C1a2e-0f8e-4c1a-9d3b-0123456789ab",
        "order-42", "", String(repeating: "k", count: 200),
    ])
    func lookupByIdAndKey(key: String) throws {
        var index = QueueIndex<Int>()
        try index.insert(id: F.id(1), origin: F.originA, idempotencyKey: key, priority: .high, tag: "t", dependsOn: F.id(9),
                         createdAt: 123, state: OperationState(retryCount: 2, lastAttemptAt: 100, nextAttemptAt: 200, lastError: "HTTP 503"),
                         locator: 77)
        let entry = try #require(index.entry(F.id(1)))
        #expect(entry.idempotencyKey == key)
        #expect(entry.origin == F.originA)
        #expect(entry.priority == .high)
        #expect(entry.tag == "t")
        #expect(entry.dependsOn == F.id(9))
        #expect(entry.createdAt == 123)
        #expect(entry.retryCount == 2)
        #expect(entry.lastAttemptAt == 100)
        #expect(entry.nextAttemptAt == 200)
        #expect(entry.lastError == "HTTP 503")
        #expect(entry.locator == 77)
        #expect(index.entry(forKey: key, origin: F.originA)?.id == F.id(1))
        if key != key.uppercased() { #expect(index.entry(forKey: key.uppercased(), origin: F.originA) == nil) }
    }

    @Test("duplicate ids and keys are refused; unknown ids are reported")
    func duplicatesAndUnknown() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1)
        #expect(throws: QueueIndexError.duplicateID(F.id(1))) {
            try index.insert(id: F.id(1), origin: F.originA, idempotencyKey: "other", priority: .normal, tag: nil,
                             dependsOn: nil, createdAt: 0, state: OperationState(), locator: 0)
        }
        #expect(throws: QueueIndexError.duplicateKey("key-1")) {
            try index.insert(id: F.id(2), origin: F.originA, idempotencyKey: "key-1", priority: .normal, tag: nil,
                             dependsOn: nil, createdAt: 0, state: OperationState(), locator: 0)
        }
        #expect(throws: QueueIndexError.unknownID(F.id(3))) { try F.setStatus(&index, 3, .completed) }
        #expect(index.remove(F.id(3)) == nil)
        #expect(index.count == 1)
    }

    @Test("an operation can be inserted from its snapshot, and a locator update is kept")
    func insertFromSnapshot() throws {
        var index = QueueIndex<Int>()
        let request = OperationRequest(id: F.id(5), origin: F.originC, method: "POST", target: "/x", headers: [:], body: [1],
                                       idempotencyKey: "k5", fingerprint: [], priority: .low, tag: nil, dependsOn: nil, createdAt: 9)
        try index.insert(OperationSnapshot(request, state: OperationState()), locator: 1)
        try index.update(F.id(5), state: OperationState(status: .inProgress), locator: 2)
        #expect(index.entry(forKey: "k5", origin: F.originC)?.locator == 2)
        #expect(index.entry(F.id(5))?.status == .inProgress)
    }

    @Test("long errors are cut in the index")
    func longErrorsAreCut() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, state: OperationState(status: .failed, lastError: String(repeating: "e", count: 1000)))
        #expect(index.entry(F.id(1))?.lastError?.count == QueueIndex<Int>.maxErrorLength)
    }

    @Test("counts by status follow every change, overall and per origin")
    func countsByStatus() throws {
        var index = QueueIndex<Int>()
        for n in 0..<6 { try F.insert(&index, n, origin: n < 4 ? F.originA : F.originB) }
        try F.setStatus(&index, 0, .inProgress)
        try F.setStatus(&index, 1, .completed)
        try F.setStatus(&index, 2, .failed)
        try F.setStatus(&index, 4, .conflict)
        index.remove(F.id(5))
        #expect(OperationStatus.allCases.map { index.count(of: $0) } == [1, 1, 1, 1, 1])
        #expect(OperationStatus.allCases.map { index.count(of: $0, origin: F.originA) } == [1, 1, 1, 1, 0])
        #expect(index.count(of: .conflict, origin: F.originB) == 1)
        #expect(index.count(of: .pending, origin: F.originC) == 0)
        #expect(index.count == 5)
    }

    @Test("pages follow queue order, and paging stays stable when the last seen operation is removed")
    func paginationIsStable() throws {
        var index = QueueIndex<Int>()
        for n in 0..<25 { try F.insert(&index, n, priority: n % 3 == 0 ? .high : .low) }
        var seen: [Int] = []
        var cursor: UInt64? = nil
        for _ in 0..<10 {
            let page = index.list(afterSequence: cursor, limit: 10)
            seen += page.entries.map { F.number($0.id) }
            // Removing the last operation seen must not disturb the next page.
            if let last = page.entries.last { index.remove(last.id) }
            guard let next = page.next else { break }
            cursor = next
        }
        #expect(seen == Array(0..<25))
        #expect(index.count == 22)
    }

    @Test("the last page has no cursor, even when it is exactly full")
    func lastPageHasNoCursor() throws {
        var index = QueueIndex<Int>()
        for n in 0..<10 { try F.insert(&index, n) }
        let first = index.list(limit: 5)
        #expect(first.next != nil)
        let second = index.list(afterSequence: first.next, limit: 5)
        #expect(second.entries.map { F.number($0.id) } == [5, 6, 7, 8, 9])
        #expect(second.next == nil)
    }

    @Test("listing filters by status, tag and origin; the id cursor works like the sequence one")
    func listingFilters() throws {
        var index = QueueIndex<Int>()
        for n in 0..<12 {
            try F.insert(&index, n, origin: n % 2 == 0 ? F.originA : F.originB, tag: n % 3 == 0 ? "batch" : nil)
        }
        for n in [0, 4, 8] { try F.setStatus(&index, n, .failed) }
        let numbers = { (page: QueueIndex<Int>.Page) in page.entries.map { F.number($0.id) } }
        #expect(numbers(index.list(.init(status: .failed), limit: 50)) == [0, 4, 8])
        #expect(numbers(index.list(.init(tag: "batch"), limit: 50)) == [0, 3, 6, 9])
        #expect(numbers(index.list(.init(status: .pending, tag: "batch", origin: F.originA), limit: 50)) == [6])
        #expect(numbers(index.list(.init(origin: F.originC), limit: 50)).isEmpty)
        #expect(try numbers(#require(index.list(.init(origin: F.originB), after: F.id(5), limit: 2))) == [7, 9])
        #expect(index.list(after: F.id(99), limit: 2) == nil)
    }

    @Test("TTL sweep lists unfinished operations older than the TTL; retention lists old completed ones")
    func sweeps() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, createdAt: 0)
        try F.insert(&index, 2, createdAt: 0, state: OperationState(status: .inProgress))
        try F.insert(&index, 3, createdAt: 0, state: OperationState(status: .failed))
        try F.insert(&index, 4, createdAt: 0, state: OperationState(status: .completed, lastAttemptAt: 50_000))
        try F.insert(&index, 5, createdAt: 0, state: OperationState(status: .completed))
        try F.insert(&index, 6, createdAt: 20_000)
        #expect(index.expired(now: 20_001, ttlSeconds: 20) == [F.id(1), F.id(2)])
        #expect(index.expired(now: 40_001, ttlSeconds: 20) == [F.id(1), F.id(2), F.id(6)])
        #expect(index.expired(now: 20_000, ttlSeconds: 20).isEmpty)
        #expect(index.retentionExpired(now: 60_000, retentionSeconds: 10) == [F.id(5)])
        #expect(index.retentionExpired(now: 60_001, retentionSeconds: 10) == [F.id(4), F.id(5)])
    }

    @Test("retention goes by each operation's latest completion, whatever order they completed in")
    func retentionFollowsLatestCompletion() throws {
        var index = QueueIndex<Int>()
        for n in 1...5 { try F.insert(&index, n, createdAt: 0) }
        // Completed in the order 3, 1, 2 but with attempt times 30, 10, 20 s (lanes overlap).
        try index.update(F.id(3), state: OperationState(status: .completed, lastAttemptAt: 30_000))
        try index.update(F.id(1), state: OperationState(status: .completed, lastAttemptAt: 10_000))
        try index.update(F.id(2), state: OperationState(status: .completed, lastAttemptAt: 20_000))
        #expect(index.retentionExpired(now: 15_001, retentionSeconds: 5) == [F.id(1)])
        #expect(index.retentionExpired(now: 25_001, retentionSeconds: 5) == [F.id(1), F.id(2)])
        // Retried (pending again), then completed again later: due by its new time only.
        try index.update(F.id(1), state: OperationState(status: .pending))
        #expect(index.retentionExpired(now: 25_001, retentionSeconds: 5) == [F.id(2)])
        try index.update(F.id(1), state: OperationState(status: .completed, lastAttemptAt: 40_000))
        #expect(index.retentionExpired(now: 35_001, retentionSeconds: 5) == [F.id(2), F.id(3)])
        #expect(index.retentionExpired(now: 45_001, retentionSeconds: 5) == [F.id(1), F.id(2), F.id(3)])
        // Removed ones are gone from the sweep.
        index.remove(F.id(2))
        #expect(index.retentionExpired(now: 45_001, retentionSeconds: 5) == [F.id(1), F.id(3)])
    }

    @Test("the retention sweep survives the index dropping its tombstones")
    func retentionAfterCompaction() throws {
        var index = QueueIndex<Int>()
        let count = 3000
        for n in 0..<count { try F.insert(&index, n, createdAt: 0) }
        for n in stride(from: 0, to: count, by: 3) {
            try index.update(F.id(n), state: OperationState(status: .completed, lastAttemptAt: Int64(n)))
        }
        // Removing the others makes the index drop its tombstones, moving every record.
        let before = index.records.count
        for n in 0..<count where n % 3 != 0 { index.remove(F.id(n)) }
        #expect(index.records.count < before, "the index kept its tombstones")
        let due = index.retentionExpired(now: 1_000 + 1_500, retentionSeconds: 1)
        #expect(due == stride(from: 0, to: 1_500, by: 3).map(F.id))
    }

    @Test("the TTL sweep walks in creation order and stops at the first operation not yet expired")
    func ttlSweepStopsAtTheFirstYoungOperation() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, createdAt: 0)
        try F.insert(&index, 2, createdAt: 0, state: OperationState(status: .completed))
        try F.insert(&index, 3, createdAt: 10_000)
        // Created after 3 with a clock set back: it expires once 3 does.
        try F.insert(&index, 4, createdAt: 5_000)
        #expect(index.expired(now: 25_001, ttlSeconds: 20) == [F.id(1)])
        #expect(index.expired(now: 30_001, ttlSeconds: 20) == [F.id(1), F.id(3), F.id(4)])
    }

    @Test("the oldest unfinished operation's creation time follows finishing and retrying")
    func oldestUnfinished() throws {
        var index = QueueIndex<Int>()
        #expect(index.oldestUnfinishedCreatedAt == nil)
        for n in 1...3 { try F.insert(&index, n, createdAt: Int64(n) * 100) }
        #expect(index.oldestUnfinishedCreatedAt == 100)
        try F.setStatus(&index, 1, .completed)
        try F.setStatus(&index, 2, .inProgress)
        #expect(index.oldestUnfinishedCreatedAt == 200)
        try F.setStatus(&index, 2, .failed)
        try F.setStatus(&index, 3, .failed)
        #expect(index.oldestUnfinishedCreatedAt == nil)
        try F.setStatus(&index, 2, .pending)
        #expect(index.oldestUnfinishedCreatedAt == 200)
    }

    @Test("compaction after many removals keeps lookups, counts, lanes and order")
    func compactionKeepsEverything() throws {
        var index = QueueIndex<Int>()
        for n in 0..<3000 { try F.insert(&index, n, origin: n % 2 == 0 ? F.originA : F.originB, dependsOn: n == 2999 ? 2997 : nil) }
        for n in 0..<3000 where n % 10 != 0 && n < 2990 { index.remove(F.id(n)) }
        #expect(index.records.count < 3000)
        #expect(index.count == 299 + 10)
        #expect(index.entry(forKey: "key-2990", origin: F.originA)?.id == F.id(2990))
        #expect(index.entry(F.id(1)) == nil)
        #expect(index.count(of: .pending) == 309)
        // 2999 waits for 2997 (odd → origin B), which is still pending.
        let laneB = try F.drain(&index, origin: F.originB)
        #expect(laneB == [2991, 2993, 2995, 2997, 2999])
        let laneA = try F.drain(&index, origin: F.originA)
        #expect(laneA == Array(stride(from: 0, to: 2990, by: 10)) + [2990, 2992, 2994, 2996, 2998])
    }
}

extension QueueIndex<Int>.Page: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.next == rhs.next && lhs.entries.map(\.id) == rhs.entries.map(\.id)
    }
}

import Foundation
@testable import OutboxModel
@testable import OutboxQueue
import Testing

/// Restoring at startup replays the log without moving lanes on every record and builds them
/// once at the end: what the index then answers must be what applying the same records one
/// by one, live, gives.
@Suite("Queue index: restoring from the log")
struct QueueIndexRestoreTests {
    typealias Fixture = QueueIndexFixture

    /// One log record, as both paths take it.
    enum Step {
        case created(Int, Origin, orderingKey: String?, dependsOn: Int?, priority: OperationPriority, key: String)
        case updated(Int, OperationState)
        case deleted(Int)
    }

    /// Two origins, keyed and default lanes, priorities, dependencies (one on an operation
    /// that fails, one on a deleted one), later states, deletions, a repeated id and a
    /// repeated key (both refused), and an error longer than the index keeps.
    static let steps: [Step] = {
        var steps: [Step] = []
        for n in 0..<60 {
            let origin = n % 5 == 4 ? Fixture.originB : Fixture.originA
            let orderingKey = n % 3 == 0 ? "lane-\(n % 2)" : nil
            let priority: OperationPriority = n % 11 == 0 ? .high : .normal
            let dependsOn = n % 13 == 12 ? n - 7 : nil
            steps.append(.created(n, origin, orderingKey: orderingKey, dependsOn: dependsOn, priority: priority,
                                  key: n == 33 ? "key-31" : "key-\(n)"))
            if n % 4 == 1 { steps.append(.updated(n - 1, OperationState(status: .completed, retryCount: 1, lastAttemptAt: 5))) }
            if n % 9 == 8 {
                steps.append(.updated(n - 3, OperationState(status: .pending, retryCount: 2, lastAttemptAt: 7, nextAttemptAt: 1_000,
                                                            lastError: String(repeating: "e", count: 300))))
            }
            if n % 10 == 7 { steps.append(.deleted(n - 2)) }
        }
        steps.append(.updated(5, OperationState(status: .failed, retryCount: 9, lastError: "HTTP 500")))
        steps.append(.created(17, Fixture.originA, orderingKey: nil, dependsOn: nil, priority: .low, key: "key-again"))
        steps.append(.updated(20, OperationState(status: .inProgress)))
        steps.append(.deleted(999))
        steps.append(.updated(998, OperationState(status: .completed)))
        return steps
    }()

    static func live(_ steps: [Step]) -> QueueIndex<Int> {
        var index = QueueIndex<Int>()
        for step in steps {
            switch step {
            case let .created(n, origin, orderingKey, dependsOn, priority, key):
                try? index.insert(id: Fixture.id(n), origin: origin, idempotencyKey: key, priority: priority, tag: nil,
                                  dependsOn: dependsOn.map(Fixture.id), createdAt: Int64(n), orderingKey: orderingKey,
                                  state: OperationState(), locator: n)
            case let .updated(n, state):
                index.update(Fixture.id(n), state: state) { $0 += 1000 }
            case let .deleted(n):
                index.remove(Fixture.id(n))
            }
        }
        return index
    }

    static func restored(_ steps: [Step]) -> (QueueIndex<Int>, refused: [QueueIndexError]) {
        var index = QueueIndex<Int>()
        var refused: [QueueIndexError] = []
        var previous: Origin?
        for step in steps {
            switch step {
            case let .created(n, origin, orderingKey, dependsOn, priority, key):
                // As recovery hands them: the origin only where it changes.
                var keyBytes = Array(key.utf8)
                let insertion = keyBytes.withUnsafeMutableBytes { bytes in
                    QueueIndex<Int>.Insertion(id: Fixture.id(n), idempotencyKey: UnsafeRawBufferPointer(bytes),
                                              origin: origin == previous ? nil : origin, priority: priority, tag: nil,
                                              dependsOn: dependsOn.map(Fixture.id), createdAt: Int64(n), orderingKey: orderingKey,
                                              state: QueueIndex<Int>.IndexedState(OperationState()))
                }
                previous = origin
                do {
                    try index.restore(insertion, locator: n)
                } catch {
                    refused.append(error)
                }
            case let .updated(n, state):
                index.restoreState(Fixture.id(n), QueueIndex<Int>.IndexedState(state)) { $0 += 1000 }
            case let .deleted(n):
                index.restoreRemoval(Fixture.id(n))
            }
        }
        index.finishRestoring()
        return (index, refused)
    }

    /// Every entry's fields, in listing (creation) order.
    static func entries(_ index: QueueIndex<Int>) -> [String] {
        index.list(limit: 1000).entries.map { entry in
            "\(Fixture.number(entry.id)) \(entry.origin) \(entry.orderingKey ?? "-") \(entry.status) \(entry.priority) "
                + "\(entry.idempotencyKey) \(entry.retryCount) \(String(describing: entry.lastAttemptAt)) "
                + "\(String(describing: entry.nextAttemptAt)) \(entry.lastError ?? "-") \(String(describing: entry.dependsOn)) \(entry.locator)"
        }
    }

    /// Delivers `origin`'s operations one at a time, over all its lanes (each attempt
    /// completes at once); the operation numbers in delivery order.
    static func drain(_ index: inout QueueIndex<Int>, origin: Origin) throws -> [Int] {
        var order: [Int] = []
        for _ in 0..<1000 {
            guard case .deliver(let id) = index.nextReady(origin: origin, now: .max).next else { break }
            try index.update(id, state: OperationState(status: .inProgress))
            try index.update(id, state: OperationState(status: .completed))
            order.append(Fixture.number(id))
        }
        return order
    }

    @Test func restoringGivesTheEntriesCountsAndLaneOrderOfApplyingLive() throws {
        var live = Self.live(Self.steps)
        var (restored, refused) = Self.restored(Self.steps)

        #expect(refused == [.duplicateKey("key-31"), .duplicateID(Fixture.id(17))])
        #expect(restored.count == live.count)
        #expect(Self.entries(restored) == Self.entries(live))
        #expect(Self.entries(restored).contains { $0.contains(String(repeating: "e", count: QueueIndex<Int>.maxErrorLength) + " ") })
        for status in OperationStatus.allCases {
            #expect(restored.count(of: status) == live.count(of: status), "\(status)")
            for origin in [Fixture.originA, Fixture.originB] {
                #expect(restored.count(of: status, origin: origin) == live.count(of: status, origin: origin))
            }
        }
        for origin in [Fixture.originA, Fixture.originB] {
            for key in [nil, "lane-0", "lane-1"] {
                #expect(restored.hasQueued(origin: origin, orderingKey: key) == live.hasQueued(origin: origin, orderingKey: key))
            }
            #expect(restored.activeLanes(origin: origin) == live.activeLanes(origin: origin))
            #expect(restored.nextReady(origin: origin, now: 0).dependencyFailed.sorted { $0.uuidString < $1.uuidString }
                == live.nextReady(origin: origin, now: 0).dependencyFailed.sorted { $0.uuidString < $1.uuidString })
        }
        // The in-progress operation ends, then each lane delivers in the same order on both.
        try live.update(Fixture.id(20), state: OperationState(status: .pending))
        try restored.update(Fixture.id(20), state: OperationState(status: .pending))
        for origin in [Fixture.originA, Fixture.originB] {
            let liveOrder = try Self.drain(&live, origin: origin)
            let restoredOrder = try Self.drain(&restored, origin: origin)
            #expect(!liveOrder.isEmpty)
            #expect(Set(restoredOrder) == Set(liveOrder))
            for key in [nil, "lane-0", "lane-1"] as [String?] {
                let inLane = { (n: Int) in (n % 3 == 0 ? "lane-\(n % 2)" : nil) == key }
                #expect(restoredOrder.filter(inLane) == liveOrder.filter(inLane), "lane \(key ?? "default") of \(origin)")
            }
        }
    }

    @Test func aFirstRecordWithoutAnOrigin_IsRefused() {
        var index = QueueIndex<Int>()
        let insertion = QueueIndex<Int>.Insertion(id: Fixture.id(1), idempotencyKey: UnsafeRawBufferPointer(start: nil, count: 0),
                                                  origin: nil, priority: .normal, tag: nil, dependsOn: nil, createdAt: 0,
                                                  orderingKey: nil, state: QueueIndex<Int>.IndexedState(OperationState()))
        #expect(throws: QueueIndexError.unknownOrigin(Fixture.id(1))) { try index.restore(insertion, locator: 1) }
        index.finishRestoring()
        #expect(index.count == 0)
    }

    @Test func keysFromBytes_AreTheKeysFromText() {
        let uuid = "0f8e4c1a-2222-4333-8444-555566667777"
        for key in [uuid, uuid.uppercased(), "0F8e4c1a-2222-4333-8444-555566667777", "order-17", "", "0f8e4c1a-2222-4333-8444-55556666777"] {
            var bytes = Array(key.utf8)
            let fromBytes = bytes.withUnsafeMutableBytes { IndexedKey(utf8: UnsafeRawBufferPointer($0)) }
            #expect(fromBytes == IndexedKey(key), "\(key)")
            #expect(fromBytes.string == key)
        }
    }
}

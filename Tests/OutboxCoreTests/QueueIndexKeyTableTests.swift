import Foundation
@testable import OutboxModel
@testable import OutboxQueue
import Testing

/// The key table hashes UUID keys by their 128 bits and text keys as strings: duplicates of
/// either kind are found, the two letter cases of a UUID stay two keys, and removals (which
/// shift later members of a probe run back) lose nothing.
@Suite("Queue index: the idempotency-key table")
struct QueueIndexKeyTableTests {
    typealias F = QueueIndexFixture

    private static func insert(_ index: inout QueueIndex<Int>, _ n: Int, key: String) throws {
        try index.insert(id: F.id(n), origin: F.originA, idempotencyKey: key, priority: .normal, tag: nil, dependsOn: nil,
                         createdAt: 0, state: OperationState(), locator: n)
    }

    /// Keys of every form: random UUIDs in both cases, UUIDs differing in one bit only, and text.
    private static func keys(_ count: Int) -> [String] {
        (0..<count).map { n in
            switch n % 4 {
            case 0: UUIDText.lowercase(UUID())
            case 1: UUID().uuidString
            case 2: String(format: "00000000-0000-4000-8000-%012x", n)
            default: "order-\(n)"
            }
        }
    }

    @Test func everyKeyIsFound_AndEveryDuplicateRefused_UUIDOrText() throws {
        var index = QueueIndex<Int>()
        let keys = Self.keys(4000)
        for (n, key) in keys.enumerated() { try Self.insert(&index, n, key: key) }
        for (n, key) in keys.enumerated() {
            #expect(index.entry(forKey: key, origin: F.originA)?.locator == n)
            #expect(throws: QueueIndexError.duplicateKey(key)) { try Self.insert(&index, 10_000 + n, key: key) }
        }
        #expect(index.count == keys.count)
    }

    /// Keys are scoped to an origin (SPEC §4): one key under two origins is two operations,
    /// each found through its own origin only; a duplicate is refused within an origin only,
    /// also when the index rebuilds its tables (growth, compaction) and when it is restored.
    @Test func oneKeyUnderTwoOrigins_IsTwoOperations_EachFoundThroughItsOrigin() throws {
        var index = QueueIndex<Int>()
        let keys = Self.keys(3000)
        let shared = 500  // keys held by both origins
        for (n, key) in keys.enumerated() {
            try index.insert(id: F.id(n), origin: F.originA, idempotencyKey: key, priority: .normal, tag: nil,
                             dependsOn: nil, createdAt: 0, state: OperationState(), locator: n)
            guard n < shared else { continue }
            try index.insert(id: F.id(10_000 + n), origin: F.originB, idempotencyKey: key, priority: .normal, tag: nil,
                             dependsOn: nil, createdAt: 0, state: OperationState(), locator: 10_000 + n)
        }
        // Three of every four operations of A removed: the tombstones come to outnumber the
        // live records, so the index compacts and rebuilds its key table on the way.
        for n in keys.indices where n % 4 != 3 { #expect(index.remove(F.id(n)) != nil) }
        for (n, key) in keys.enumerated() {
            #expect(index.entry(forKey: key, origin: F.originA)?.locator == (n % 4 == 3 ? n : nil))
            #expect(index.entry(forKey: key, origin: F.originB)?.locator == (n < shared ? 10_000 + n : nil))
            #expect(index.entry(forKey: key, origin: F.originC) == nil)
        }
        for n in 0..<shared {
            #expect(throws: QueueIndexError.duplicateKey(keys[n])) {
                try index.insert(id: F.id(20_000 + n), origin: F.originB, idempotencyKey: keys[n], priority: .normal, tag: nil,
                                 dependsOn: nil, createdAt: 0, state: OperationState(), locator: 0)
            }
        }

        var restored = QueueIndex<Int>()
        for origin in [F.originA, F.originB] {
            let insertion = QueueIndex<Int>.Insertion(id: origin == F.originA ? F.id(1) : F.id(2), origin: origin,
                                                      idempotencyKey: "shared", priority: .normal, tag: nil, dependsOn: nil,
                                                      createdAt: 0, orderingKey: nil, state: OperationState())
            try restored.restore(insertion, locator: origin == F.originA ? 1 : 2)
        }
        restored.finishRestoring()
        #expect(restored.entry(forKey: "shared", origin: F.originA)?.locator == 1)
        #expect(restored.entry(forKey: "shared", origin: F.originB)?.locator == 2)
    }

    @Test func bothLetterCasesOfOneUUID_AreTwoKeys() throws {
        var index = QueueIndex<Int>()
        let uuid = UUID()
        try Self.insert(&index, 1, key: UUIDText.lowercase(uuid))
        try Self.insert(&index, 2, key: uuid.uuidString)
        #expect(index.entry(forKey: UUIDText.lowercase(uuid), origin: F.originA)?.locator == 1)
        #expect(index.entry(forKey: uuid.uuidString, origin: F.originA)?.locator == 2)
        #expect(throws: QueueIndexError.duplicateKey(uuid.uuidString)) { try Self.insert(&index, 3, key: uuid.uuidString) }
    }

    @Test func removingEveryOtherKey_KeepsTheRest_AndFreesTheRemovedForReuse() throws {
        var index = QueueIndex<Int>()
        let keys = Self.keys(3000)
        for (n, key) in keys.enumerated() { try Self.insert(&index, n, key: key) }
        for n in stride(from: 0, to: keys.count, by: 2) { #expect(index.remove(F.id(n)) != nil) }
        for (n, key) in keys.enumerated() {
            #expect(index.entry(forKey: key, origin: F.originA)?.locator == (n % 2 == 0 ? nil : n))
        }
        for n in stride(from: 0, to: keys.count, by: 2) { try Self.insert(&index, 20_000 + n, key: keys[n]) }
        for n in stride(from: 0, to: keys.count, by: 2) { #expect(index.entry(forKey: keys[n], origin: F.originA)?.locator == 20_000 + n) }
    }

    @Test func anUpdateInPlace_ChangesStateAndLocator_AndReportsAnUnknownId() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1)
        let state = OperationState(status: .failed, retryCount: 3, lastError: "HTTP 500")
        #expect(index.update(F.id(1), state: state) { $0 += 40 })
        #expect(index.entry(F.id(1))?.locator == 41)
        #expect(index.entry(F.id(1))?.status == .failed)
        #expect(index.entry(F.id(1))?.retryCount == 3)
        #expect(index.count(of: .failed) == 1)
        #expect(!index.update(F.id(2), state: state) { $0 = 0 })
        #expect(index.count == 1)
    }
}

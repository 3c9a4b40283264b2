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
            #expect(index.entry(forKey: key)?.locator == n)
            #expect(throws: QueueIndexError.duplicateKey(key)) { try Self.insert(&index, 10_000 + n, key: key) }
        }
        #expect(index.count == keys.count)
    }

    @Test func bothLetterCasesOfOneUUID_AreTwoKeys() throws {
        var index = QueueIndex<Int>()
        let uuid = UUID()
        try Self.insert(&index, 1, key: UUIDText.lowercase(uuid))
        try Self.insert(&index, 2, key: uuid.uuidString)
        #expect(index.entry(forKey: UUIDText.lowercase(uuid))?.locator == 1)
        #expect(index.entry(forKey: uuid.uuidString)?.locator == 2)
        #expect(throws: QueueIndexError.duplicateKey(uuid.uuidString)) { try Self.insert(&index, 3, key: uuid.uuidString) }
    }

    @Test func removingEveryOtherKey_KeepsTheRest_AndFreesTheRemovedForReuse() throws {
        var index = QueueIndex<Int>()
        let keys = Self.keys(3000)
        for (n, key) in keys.enumerated() { try Self.insert(&index, n, key: key) }
        for n in stride(from: 0, to: keys.count, by: 2) { #expect(index.remove(F.id(n)) != nil) }
        for (n, key) in keys.enumerated() {
            #expect(index.entry(forKey: key)?.locator == (n % 2 == 0 ? nil : n))
        }
        for n in stride(from: 0, to: keys.count, by: 2) { try Self.insert(&index, 20_000 + n, key: keys[n]) }
        for n in stride(from: 0, to: keys.count, by: 2) { #expect(index.entry(forKey: keys[n])?.locator == 20_000 + n) }
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

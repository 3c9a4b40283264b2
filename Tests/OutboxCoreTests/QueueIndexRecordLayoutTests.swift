import Foundation
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxStorage
import Testing

/// The packed parts of an index record: the boxed optional fields keep value semantics, and
/// the packed locator gives back exactly the locations it was given.
@Suite("Queue index: record layout")
struct QueueIndexRecordLayoutTests {
    typealias F = QueueIndexFixture

    @Test("a copy of the index keeps its tag, error and dependency while the original changes them")
    func optionalFieldsAreValues() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, tag: "batch", state: OperationState(lastError: "HTTP 503"))
        try F.insert(&index, 2, dependsOn: 1)
        let copy = index
        try index.update(F.id(1), state: OperationState(lastError: "timed out"))
        try index.update(F.id(2), state: OperationState(retryCount: 1, lastError: "refused"))
        #expect(copy.entry(F.id(1))?.lastError == "HTTP 503")
        #expect(copy.entry(F.id(1))?.tag == "batch")
        #expect(copy.entry(F.id(2))?.lastError == nil)
        #expect(index.entry(F.id(1))?.lastError == "timed out")
        #expect(index.entry(F.id(1))?.tag == "batch")
        #expect(index.entry(F.id(2))?.lastError == "refused")
        #expect(index.entry(F.id(2))?.dependsOn == F.id(1))
    }

    @Test("clearing the last optional field leaves the others alone, and a cleared error stays cleared")
    func clearingFields() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, state: OperationState(lastError: "HTTP 503"))
        try F.insert(&index, 2, tag: "t", state: OperationState(lastError: "HTTP 503"))
        try index.update(F.id(1), state: OperationState())
        try index.update(F.id(2), state: OperationState())
        #expect(index.entry(F.id(1))?.lastError == nil)
        #expect(index.entry(F.id(1))?.tag == nil)
        #expect(index.entry(F.id(2))?.lastError == nil)
        #expect(index.entry(F.id(2))?.tag == "t")
        #expect(index.list(QueueIndex<Int>.Filter(tag: "t"), limit: 10).entries.map(\.id) == [F.id(2)])
    }

    @Test("the packed locator returns the created and state locations it was given", arguments: [
        nil, RecordLocation(segment: 9, generation: 2, offset: 1 << 40, length: 77),
    ])
    func packedLocator(state: RecordLocation?) {
        let created = RecordLocation(segment: 0xFFFF_FFFF, generation: 3, offset: 64 << 20, length: 1 << 30)
        var records = OperationRecords(created: created, state: state)
        #expect(records.created == created)
        #expect(records.state == state)
        let later = RecordLocation(segment: 4, offset: 16, length: 9)
        records.state = later
        records.created = later
        #expect(records.state == later)
        #expect(records.created == later)
        records.state = nil
        #expect(records.state == nil)
        #expect(records == OperationRecords(created: later, state: nil))
    }

    @Test("a UUID key in lower and in upper case are two keys, each found by its own spelling")
    func uuidKeyCasesStayDistinct() throws {
        var index = QueueIndex<Int>()
        let key = "7b7c1a2e-0f8e-4c1a-9d3b-0123456789ab"
        try index.insert(id: F.id(1), origin: F.originA, idempotencyKey: key, priority: .normal, tag: nil,
                         dependsOn: nil, createdAt: 0, state: OperationState(), locator: 1)
        try index.insert(id: F.id(2), origin: F.originA, idempotencyKey: key.uppercased(), priority: .normal, tag: nil,
                         dependsOn: nil, createdAt: 0, state: OperationState(), locator: 2)
        #expect(index.entry(forKey: key, origin: F.originA)?.id == F.id(1))
        #expect(index.entry(forKey: key.uppercased(), origin: F.originA)?.id == F.id(2))
        index.remove(F.id(1))
        #expect(index.entry(forKey: key, origin: F.originA) == nil)
        #expect(index.entry(forKey: key.uppercased(), origin: F.originA)?.id == F.id(2))
    }

    @Test("an index that reserved room finds, counts and lists what it holds, and grows past the reservation")
    func reservedIndex() throws {
        var index = QueueIndex<Int>()
        index.reserveCapacity(100)
        for n in 0..<300 { try F.insert(&index, n, tag: n % 3 == 0 ? "third" : nil) }
        #expect(index.count == 300)
        for n in [0, 99, 100, 299] {
            #expect(index.entry(F.id(n))?.locator == n)
            #expect(index.entry(forKey: "key-\(n)", origin: F.originA)?.id == F.id(n))
        }
        #expect(index.list(QueueIndex<Int>.Filter(tag: "third"), limit: 1000).entries.count == 100)
        #expect(try F.drain(&index).count == 300)
    }

    /// The budget: a million records in a 2^20-slot array within 136 MiB, which leaves room for
    /// one more inline optional string (16 bytes) over today's 120.
    @Test("a record with the queue's locator takes at most 136 bytes")
    func recordStride() {
        #expect(MemoryLayout<OperationRecords>.size == 40)
        #expect(MemoryLayout<QueueIndex<OperationRecords>.Record>.stride <= 136)
    }
}

/// How much room a restarting queue reserves for the operations recovery expects.
@Suite("Queue: index reservation at startup")
struct QueueReservationTests {
    @Test("room for the estimate and for appends that were in flight at the limit, never far past the limit",
          arguments: [0, 1, 5_000, 999_990, 1_000_000, 1_000_057, 25_000_000])
    func reservation(records: Int) {
        let maxOperations = 1_000_000
        let reserved = OutboxQueue.reservation(expecting: records, maxOperations: maxOperations)
        #expect(reserved >= min(records, maxOperations) + 1024)
        #expect(reserved <= maxOperations + maxOperations / 20 + 1024)
    }
}

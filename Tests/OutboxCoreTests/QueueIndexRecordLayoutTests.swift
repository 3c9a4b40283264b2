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

    /// The budget: a million records in a 2^20-slot array within 136 MiB, which leaves room for
    /// one more inline optional string (16 bytes) over today's 120.
    @Test("a record with the queue's locator takes at most 136 bytes")
    func recordStride() {
        #expect(MemoryLayout<OperationRecords>.size == 40)
        #expect(MemoryLayout<QueueIndex<OperationRecords>.Record>.stride <= 136)
    }
}

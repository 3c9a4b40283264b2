import Foundation
@testable import OutboxModel
@testable import OutboxQueue
import Testing

/// What the queue reads ahead while an attempt is in flight: the operation its lane delivers
/// next, and only when that is what the origin delivers next (no other lane waits for a turn).
@Suite("Queue index: the operation up next")
struct QueueIndexUpNextTests {
    typealias F = QueueIndexFixture

    @Test("a lane alone names its next head, by priority; with another lane waiting, nothing")
    func upNextOnlyWhenNoOtherLaneWaits() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, orderingKey: "a")
        try F.insert(&index, 2, orderingKey: "a")
        try F.insert(&index, 3, priority: .high, orderingKey: "a")
        // 3 (high) goes first; then, with 3 in flight, 1 is the lane's next.
        #expect(try QueueIndexLaneTests.start(&index) == 3)
        #expect(index.upNext(after: F.id(3)).map { F.number($0.id) } == 1)
        #expect(index.upNext(after: F.id(3))?.locator == 1, "the locator is not the operation's")

        try F.insert(&index, 4, orderingKey: "b")
        #expect(index.upNext(after: F.id(3)) == nil, "lane b waits for its turn, yet lane a's next was named")
        #expect(try QueueIndexLaneTests.start(&index) == 4)
        #expect(index.upNext(after: F.id(4)) == nil, "lane b has nothing else")
        #expect(index.upNext(after: F.id(3)).map { F.number($0.id) } == 1, "with lane b in flight, lane a's next")
        #expect(index.upNext(after: F.id(99)) == nil)
    }
}

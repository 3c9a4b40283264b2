import Foundation
@testable import OutboxModel
@testable import OutboxQueue
import Testing

/// The lane's head rule (priority orders only what was not attempted), taking an operation for
/// delivery with its attempt number and the marks ahead, and removals as one step with the
/// lane's next pick.
@Suite("Queue index: attempted heads, attempt numbers, removals")
struct QueueIndexAttemptTests {
    typealias F = QueueIndexFixture

    /// What the origin names next at `now`, as an operation number.
    static func next(_ index: inout QueueIndex<Int>, now: Int64 = 0) -> Int? {
        guard case .deliver(let id) = index.nextReady(origin: F.originA, now: now).next else { return nil }
        return F.number(id)
    }

    struct NotTaken: Error {}

    /// Takes operation `n` at `now` (mutating calls stay out of the expectation macros).
    @discardableResult
    static func take(_ index: inout QueueIndex<Int>, _ n: Int, now: Int64) throws -> QueueIndex<Int>.Take {
        guard let taken = index.take(F.id(n), now: now) else {
            Issue.record("operation \(n) was not taken")
            throw NotTaken()
        }
        return taken
    }

    /// Takes `n` at `now` and ends its attempt with a retry due at `retryAt`.
    static func attemptAndRetry(_ index: inout QueueIndex<Int>, _ n: Int, now: Int64, retryAt: Int64) throws {
        let taken = try take(&index, n, now: now)
        var retry = taken.inProgress
        retry.status = .pending
        retry.retryCount += 1
        retry.nextAttemptAt = retryAt
        try index.update(F.id(n), state: retry)
    }

    @Test("a critical write arriving while the lane's head backs off waits: the head goes first when due")
    func attemptedHeadStaysAheadOfHigherPriority() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1)
        try F.insert(&index, 2, priority: .normal)
        #expect(Self.next(&index) == 1)
        try Self.attemptAndRetry(&index, 1, now: 0, retryAt: 1_000)
        try F.insert(&index, 3, priority: .critical)
        try F.insert(&index, 4, priority: .high)
        let step = index.nextReady(origin: F.originA, now: 500)
        #expect(step.next == .wait(until: 1_000), "a lane backing off sent something")
        #expect(Self.next(&index, now: 1_000) == 1, "the attempted head was overtaken")
        try Self.take(&index, 1, now: 1_000)
        try F.setStatus(&index, 1, .completed)
        // Once it ended, priority orders the rest.
        #expect(try QueueIndexLaneTests.deliverOneByOne(&index, now: 1_000) == [3, 4, 2])
    }

    @Test("a restart finds an attempted operation still its lane's head, ahead of higher priorities")
    func attemptedHeadAfterRestore() throws {
        var index = QueueIndex<Int>()
        let attempted = QueueIndex<Int>.IndexedState(status: .pending, retryCount: 1, lastAttemptAt: 10, nextAttemptAt: nil,
                                                     lastError: "HTTP 500", attempts: 1)
        let fresh = QueueIndex<Int>.IndexedState(status: .pending, retryCount: 0, lastAttemptAt: nil, nextAttemptAt: nil,
                                                  lastError: nil)
        for (n, priority, state) in [(1, OperationPriority.low, attempted), (2, .critical, fresh), (3, .high, fresh)] {
            try index.restore(QueueIndex<Int>.Insertion(id: F.id(n), origin: F.originA, idempotencyKey: "key-\(n)", priority: priority,
                                                        tag: nil, dependsOn: nil, createdAt: 0, orderingKey: nil,
                                                        state: OperationState(status: .pending)), locator: n)
            index.restoreState(F.id(n), state, relocate: { _ in })
        }
        index.finishRestoring()
        #expect(try QueueIndexLaneTests.deliverOneByOne(&index) == [1, 2, 3])
    }

    @Test("an admin retry is a fresh start: the retried operation goes by its priority again")
    func adminRetryJoinsByPriority() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, priority: .low)
        try F.insert(&index, 2, priority: .high)
        try Self.take(&index, 2, now: 0)
        try F.setStatus(&index, 2, .completed)
        try Self.take(&index, 1, now: 0)
        try index.update(F.id(1), state: OperationState(status: .failed, lastAttemptAt: 0, attempts: 1))
        try F.insert(&index, 3, priority: .normal)
        // What `OutboxQueue.retry` records: pending, no attempt in this run, its count kept.
        try index.update(F.id(1), state: OperationState(status: .pending, attempts: 1))
        #expect(try QueueIndexLaneTests.deliverOneByOne(&index) == [3, 1])
    }

    @Test("a taken operation is in flight at once and numbered one past its attempts; its lane is busy")
    func takeNumbersTheAttempt() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, state: OperationState(status: .pending, retryCount: 2, attempts: 5))
        let taken = try Self.take(&index, 1, now: 42)
        #expect(taken.inProgress.status == .inProgress)
        #expect(taken.inProgress.attempts == 6)
        #expect(taken.inProgress.lastAttemptAt == 42)
        #expect(taken.mark == .missing, "no mark was made ahead: the caller writes one")
        #expect(index.entry(F.id(1))?.status == .inProgress)
        let step = index.nextReady(origin: F.originA, now: 0)
        #expect(step.next == .busy)
        let again = index.take(F.id(1), now: 43)
        #expect(again == nil, "taken twice")
    }

    @Test("the lane's next operations are marked ahead, in delivery order; a marked one is numbered by its mark")
    func marksAhead() throws {
        var index = QueueIndex<Int>()
        let count = QueueIndex<Int>.marksAhead + 10
        for n in 0..<count { try F.insert(&index, n, priority: n == 5 ? .critical : .normal) }
        let named = Self.next(&index)
        let first = try #require(named)
        #expect(first == 5)
        try Self.take(&index, first, now: 0)
        let marked = index.reserveAhead(after: F.id(first)).map { F.number($0.id) }
        #expect(marked == Array((0..<count).filter { $0 != 5 }.prefix(QueueIndex<Int>.marksAhead)))
        let markedAgain = index.reserveAhead(after: F.id(first))
        #expect(markedAgain.isEmpty, "marked again while plenty are marked")
        #expect(index.entry(F.id(0))?.attempts == 1, "a mark counts the attempt it may start")
        index.markWritten(F.id(0), number: 1, written: true)
        try F.setStatus(&index, first, .completed)
        let taken = try Self.take(&index, 0, now: 1)
        #expect(taken.inProgress.attempts == 1, "a marked attempt is numbered by its mark, not one past it")
        #expect(taken.mark == .written)
        try F.setStatus(&index, 0, .completed)
        #expect(try Self.take(&index, 1, now: 2).mark == .writing, "its mark is not on disk yet")
    }

    @Test("a clean stop gives the marks ahead back: each operation counts the attempts it made")
    func releaseMarks() throws {
        var index = QueueIndex<Int>()
        for n in 0..<4 { try F.insert(&index, n) }
        try Self.take(&index, 0, now: 0)
        let marked = index.reserveAhead(after: F.id(0))
        #expect(marked.count == 3)
        let released = index.releaseMarks()
        #expect(Set(released.map(\.id)) == Set(marked.map(\.id)))
        for n in 1..<4 { #expect(index.entry(F.id(n))?.attempts == 0) }
        #expect(index.entry(F.id(0))?.attempts == 1, "the attempt taken is not given back")
        // Marked again from scratch: the lane's count went back to zero.
        let markedAfresh = index.reserveAhead(after: F.id(0))
        #expect(markedAfresh.count == 3)
    }

    @Test("an attempt taken and never sent goes back as it was, its number with it")
    func releaseOneAttempt() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, state: OperationState(status: .pending, attempts: 2))
        try F.insert(&index, 2)
        let taken = try Self.take(&index, 1, now: 5)
        let given = index.release(F.id(1), taken: taken.entry.state, number: taken.inProgress.attempts)
        #expect(given)
        #expect(index.entry(F.id(1))?.status == .pending)
        #expect(index.entry(F.id(1))?.attempts == 2)
        #expect(Self.next(&index) == 1, "it is not back at its place")
        #expect(try Self.take(&index, 1, now: 6).inProgress.attempts == 3)
    }

    @Test("an attempt that never left Outbox gives its number back as it ends; one that may have been sent keeps it")
    func notSentOutcomeGivesTheNumberBack() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, state: OperationState(status: .pending, attempts: 2))
        let taken = try Self.take(&index, 1, now: 5)
        #expect(taken.inProgress.attempts == 3)
        // The outcome `notSent` makes (ReplayTransition): pending, the attempt's number given back.
        var notSent = taken.inProgress
        notSent.status = .pending
        notSent.attempts -= 1
        try index.update(F.id(1), state: notSent)
        #expect(index.entry(F.id(1))?.attempts == 2)
        let again = try Self.take(&index, 1, now: 6)
        #expect(again.inProgress.attempts == 3, "the attempt not sent used up a number")
        // A retry after an attempt that may have been sent: its number stays counted.
        var retry = again.inProgress
        retry.status = .pending
        retry.retryCount += 1
        try index.update(F.id(1), state: retry)
        #expect(try Self.take(&index, 1, now: 7).inProgress.attempts == 4)
    }

    @Test("an operation whose removal began is never taken; the lane goes on without it, and an aborted removal puts it back in order")
    func removalIsOneStepWithThePick() throws {
        var index = QueueIndex<Int>()
        for n in 1...3 { try F.insert(&index, n) }
        let begun = index.beginRemoval(F.id(1))
        #expect(begun?.entry.id == F.id(1))
        #expect(begun?.inFlight == nil)
        let twice = index.beginRemoval(F.id(1))
        #expect(twice == nil, "a removal under way began twice")
        let taken = index.take(F.id(1), now: 0)
        #expect(taken == nil)
        #expect(Self.next(&index) == 2)
        #expect(index.entry(F.id(1))?.status == .pending, "counted as it is until it is gone")
        index.abortRemoval(F.id(1))
        #expect(Self.next(&index) == 1, "back at its creation-order place")
        _ = index.beginRemoval(F.id(2))
        index.remove(F.id(2))
        #expect(index.entry(F.id(2)) == nil)
        try Self.take(&index, 1, now: 0)
        try F.setStatus(&index, 1, .completed)
        #expect(Self.next(&index) == 3)
    }

    @Test("a removal that looks again as it begins leaves an operation taken since the listing")
    func removalLooksAgain() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1)
        try Self.take(&index, 1, now: 0)
        let begun = index.beginRemoval(F.id(1), where: { $0.status == .pending })
        #expect(begun == nil)
        #expect(index.entry(F.id(1))?.status == .inProgress)
    }

    @Test("an operation in flight when its removal begins hands over its attempt's cancellation, and keeps its lane busy until it is gone")
    func inFlightRemovalKeepsTheLaneBusy() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1)
        try F.insert(&index, 2)
        let cancellation = CallCancellation()
        _ = index.take(F.id(1), now: 0, cancellation: cancellation)
        let begun = index.beginRemoval(F.id(1))
        #expect(begun?.entry.status == .inProgress)
        #expect(begun?.inFlight === cancellation, "the attempt in flight was not handed over to be cancelled")
        let step = index.nextReady(origin: F.originA, now: 0)
        #expect(step.next == .busy)
        index.remove(F.id(1))
        #expect(Self.next(&index) == 2)
    }

    @Test("an attempt that ended leaves nothing to cancel")
    func endedAttemptLeavesNoCancellation() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1)
        _ = index.take(F.id(1), now: 0, cancellation: CallCancellation())
        try F.setStatus(&index, 1, .completed)
        let begun = index.beginRemoval(F.id(1))
        #expect(begun != nil && begun?.inFlight == nil)
    }

    @Test("an in-flight operation whose removal failed is pending again, attempted, and goes first")
    func abortedInFlightRemoval() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, priority: .low)
        try Self.take(&index, 1, now: 0)
        _ = index.beginRemoval(F.id(1))
        try F.insert(&index, 2, priority: .critical)
        index.abortRemoval(F.id(1))
        #expect(index.entry(F.id(1))?.status == .pending)
        #expect(Self.next(&index) == 1)
    }
}

import Foundation
@testable import OutboxModel
@testable import OutboxQueue
import Testing

@Suite("Queue index: dependencies between operations")
struct QueueIndexDependencyTests {
    typealias F = QueueIndexFixture

    @Test("a dependent waits while its dependency is pending or in progress, then proceeds once it completes")
    func dependentWaitsForCompletion() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, origin: F.originB)
        try F.insert(&index, 2, dependsOn: 1)
        #expect(index.nextReady(origin: F.originA, now: 0) == LaneStep(next: .idle))
        try F.setStatus(&index, 1, .inProgress)
        #expect(index.nextReady(origin: F.originA, now: 0) == LaneStep(next: .idle))
        _ = index.takeLanesToWake()
        try F.setStatus(&index, 1, .completed)
        #expect(Set(index.takeLanesToWake()) == [F.originA, F.originB])
        #expect(index.nextReady(origin: F.originA, now: 0).next == .deliver(F.id(2)))
    }

    @Test("a waiting operation is set aside and the rest of its lane proceeds")
    func waitingOperationIsSetAside() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, origin: F.originB)
        try F.insert(&index, 2, dependsOn: 1)
        try F.insert(&index, 3)
        #expect(try F.drain(&index) == [3])
        try F.setStatus(&index, 1, .completed)
        #expect(try F.drain(&index) == [2])
    }

    @Test("a dependent of higher priority than its same-lane dependency does not deadlock the lane")
    func higherPriorityDependentDoesNotDeadlock() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, priority: .low)
        try F.insert(&index, 2, priority: .critical, dependsOn: 1)
        try F.insert(&index, 3, priority: .normal)
        #expect(try F.drain(&index) == [3, 1, 2])
    }

    @Test("operations depending on a waiting one wait too (transitively)")
    func transitiveWait() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, origin: F.originB)
        try F.insert(&index, 2, dependsOn: 1)
        try F.insert(&index, 3, dependsOn: 2)
        #expect(try F.drain(&index).isEmpty)
        try F.setStatus(&index, 1, .completed)
        #expect(try F.drain(&index) == [2, 3])
    }

    @Test("a dependency ending failed or conflict reports its dependents to fail", arguments: [OperationStatus.failed, .conflict])
    func failedDependencyDoomsDependents(ending: OperationStatus) throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, origin: F.originB)
        try F.insert(&index, 2, dependsOn: 1)
        try F.insert(&index, 3, dependsOn: 2)
        try F.insert(&index, 4)
        try F.setStatus(&index, 1, ending)
        let step = index.nextReady(origin: F.originA, now: 0)
        #expect(step == LaneStep(next: .deliver(F.id(4)), dependencyFailed: [F.id(2)]))
        // The caller fails 2; then 3, which depends on 2, is reported in turn.
        try index.update(F.id(2), state: ReplayTransition.failDependency(current: OperationState()))
        #expect(index.entry(F.id(2))?.lastError == "dependency failed")
        #expect(index.nextReady(origin: F.originA, now: 0).dependencyFailed == [F.id(3)])
        try index.update(F.id(3), state: ReplayTransition.failDependency(current: OperationState()))
        #expect(index.nextReady(origin: F.originA, now: 0).dependencyFailed.isEmpty)
    }

    @Test("dependency failures are reported even while the lane is busy")
    func doomedReportedWhileBusy() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1)
        try F.insert(&index, 2, dependsOn: 1)
        try F.insert(&index, 3)
        try F.setStatus(&index, 3, .inProgress)
        try F.setStatus(&index, 1, .failed)
        #expect(index.nextReady(origin: F.originA, now: 0) == LaneStep(next: .busy, dependencyFailed: [F.id(2)]))
    }

    @Test("retrying a failed dependency makes its dependents wait again instead of failing")
    func retriedDependencyRevivesDependents() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, origin: F.originB)
        try F.insert(&index, 2, dependsOn: 1)
        try F.setStatus(&index, 1, .failed)
        #expect(index.nextReady(origin: F.originA, now: 0).dependencyFailed == [F.id(2)])
        try F.setStatus(&index, 1, .pending)
        #expect(index.nextReady(origin: F.originA, now: 0) == LaneStep(next: .idle))
        try F.setStatus(&index, 1, .completed)
        #expect(try F.drain(&index) == [2])
    }

    @Test("a dependency that is not indexed counts as completed")
    func missingDependencyIsSatisfied() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 2, dependsOn: 1)
        #expect(try F.drain(&index) == [2])
    }

    @Test("removing a pending dependency releases its dependents")
    func removedDependencyReleasesDependents() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, origin: F.originB)
        try F.insert(&index, 2, dependsOn: 1)
        #expect(index.nextReady(origin: F.originA, now: 0).next == .idle)
        index.remove(F.id(1))
        #expect(index.nextReady(origin: F.originA, now: 0).next == .deliver(F.id(2)))
    }

    @Test("removing a waiting dependent detaches it from its dependency")
    func removedDependentIsDetached() throws {
        var index = QueueIndex<Int>()
        try F.insert(&index, 1, origin: F.originB)
        try F.insert(&index, 2, dependsOn: 1)
        index.remove(F.id(2))
        try F.setStatus(&index, 1, .failed)
        #expect(index.nextReady(origin: F.originA, now: 0) == LaneStep(next: .idle))
        #expect(index.count == 1)
    }
}

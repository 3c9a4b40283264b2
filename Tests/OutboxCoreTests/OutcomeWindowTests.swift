import Foundation
@testable import OutboxReplay
import Synchronization
import Testing

/// The window that bounds a lane's unwritten outcomes: room while fewer than its capacity are
/// unwritten, a held caller let go by the first settlement, and a drain for the lane's end.
@Suite("Outcome window")
struct OutcomeWindowTests {
    /// Yields until `condition` holds (bounded): the window's waiters register on another task,
    /// and nothing announces it. The bound is reached only by a failing test: a starved
    /// cooperative pool on a busy CI machine overran a 5 s one elsewhere.
    static func eventually(_ condition: () -> Bool) async {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() && ContinuousClock.now < deadline { await Task.yield() }
    }

    @Test func theContractsBoundIsTheDefaultCapacity() {
        #expect(OutcomeWindow.redeliveryBound == 32)
        #expect(OutcomeWindow().capacity == 32)
    }

    @Test func roomWhileFewerThanCapacityAreUnwritten_ThenTheCallerWaitsUntilOneSettles() async {
        let window = OutcomeWindow(capacity: 3)
        var settlements: [@Sendable () -> Void] = []
        for _ in 0..<3 {
            await window.waitForRoom()  // returns at once: fewer than 3 unwritten
            settlements.append(window.track())
        }
        #expect(window.unwritten == 3)

        let admitted = Atomic<Bool>(false)
        let waiter = Task {
            await window.waitForRoom()
            admitted.store(true, ordering: .relaxed)
        }
        await Self.eventually { window.waiting == 1 }
        #expect(window.waiting == 1, "a full window let the caller through")
        let early = admitted.load(ordering: .relaxed)
        #expect(!early)

        settlements[1]()
        await waiter.value
        let late = admitted.load(ordering: .relaxed)
        #expect(late)
        #expect(window.unwritten == 2)
        #expect(window.waiting == 0)
    }

    @Test func settlingTwice_FreesOneSlot() async {
        let window = OutcomeWindow(capacity: 2)
        let first = window.track()
        _ = window.track()
        first()
        first()
        #expect(window.unwritten == 1)
    }

    @Test func settlementsFromOtherThreads_EachFreeTheirSlot() async {
        let window = OutcomeWindow(capacity: 8)
        let settlements = (0..<64).map { _ in window.track() }
        // The log settles on its writer thread: here many threads at once.
        await withTaskGroup(of: Void.self) { group in
            for settle in settlements { group.addTask { settle() } }
        }
        #expect(window.unwritten == 0)
        await window.waitForRoom()
    }

    /// The log may hold outcomes back; the window hurries them once a quarter of its capacity
    /// was tracked since the last hurry, so the sync overlaps the lane's next sends.
    @Test func aQuarterOfTheCapacityTracked_HurriesTheLog_OncePerQuarter() {
        let hurries = Atomic<Int>(0)
        let window = OutcomeWindow(capacity: 16, hurry: { hurries.add(1, ordering: .relaxed) })
        var settlements: [@Sendable () -> Void] = []
        for _ in 0..<3 { settlements.append(window.track()) }
        #expect(hurries.load(ordering: .relaxed) == 0)
        settlements.append(window.track())
        #expect(hurries.load(ordering: .relaxed) == 1)
        for settle in settlements { settle() }
        for _ in 0..<3 { _ = window.track() }
        #expect(hurries.load(ordering: .relaxed) == 1, "settlements alone hurried again")
        _ = window.track()
        #expect(hurries.load(ordering: .relaxed) == 2)
    }

    /// A lane about to wait for room hurries the outcomes it waits for, even fewer than a quarter.
    @Test func aLaneThatMustWaitForRoom_HurriesTheOutcomesItWaitsFor() async {
        let hurries = Atomic<Int>(0)
        // A quarter of 9 is 2: tracking 9 hurries after the 2nd, 4th, 6th and 8th; the 9th waits.
        let window = OutcomeWindow(capacity: 9, hurry: { hurries.add(1, ordering: .relaxed) })
        let settlements = (0..<9).map { _ in window.track() }
        #expect(hurries.load(ordering: .relaxed) == 4)
        let waiter = Task { await window.waitForRoom() }
        // The hurry follows the waiter's registration, outside the window's lock.
        await Self.eventually { window.waiting == 1 && hurries.load(ordering: .relaxed) == 5 }
        #expect(window.waiting == 1)
        #expect(hurries.load(ordering: .relaxed) == 5)
        settlements[0]()
        await waiter.value
        #expect(window.waiting == 0)
    }
}

import Foundation
@testable import OutboxProxy
import Synchronization
import Testing

/// `limits.bodyMemoryBytes` as a counter: reserve within the limit, refuse beyond it, give
/// back; a loop's lease serves small bodies from its own credit.
@Suite("Body memory budget: reserve, refuse, return")
struct BodyMemoryBudgetTests {
    @Test func reservationsFitUnderTheLimit_AndOneBeyondItTakesNothing() {
        let budget = BodyMemoryBudget(limit: 1000)
        #expect(budget.reserve(600))
        #expect(budget.reserve(400))
        #expect(!budget.reserve(1), "the limit is full")
        #expect(budget.inUse == 1000)
        budget.release(400)
        #expect(!budget.reserve(401), "a refused reservation takes nothing")
        #expect(budget.inUse == 600)
        #expect(budget.reserve(400))
        budget.release(1000)
        #expect(budget.inUse == 0)
    }

    @Test func aZeroBudgetRefusesEveryByte() {
        let budget = BodyMemoryBudget(limit: 0)
        #expect(!budget.reserve(1))
        let lease = BodyMemoryBudget.Lease(budget)
        #expect(!lease.take(1))
        #expect(lease.take(0))
        #expect(budget.inUse == 0)
    }

    @Test func threadsReservingAtOnce_NeverExceedTheLimit_AndReturnEverything() {
        let budget = BodyMemoryBudget(limit: 64 * 1024)
        let highest = Atomic<Int>(0)
        let done = DispatchGroup()
        for thread in 0..<4 {
            done.enter()
            Thread {
                for round in 0..<20_000 {
                    let bytes = 1 + (round &* 7919 &+ thread) % 20_000
                    if budget.reserve(bytes) {
                        highest.max(budget.inUse, ordering: .relaxed)
                        budget.release(bytes)
                    }
                }
                done.leave()
            }.start()
        }
        #expect(done.wait(timeout: .now() + 120) == .success)
        #expect(highest.load(ordering: .relaxed) <= 64 * 1024)
        #expect(budget.inUse == 0)
    }

    @Test func aLeaseServesSmallBodiesFromItsCredit_AndGivesBackAllButAQuantum() {
        let budget = BodyMemoryBudget(limit: 64 << 20)
        let lease = BodyMemoryBudget.Lease(budget)
        // The first small body takes one quantum ahead (256 KiB with this budget)...
        #expect(lease.take(16 * 1024))
        let afterFirst = budget.inUse
        #expect(afterFirst == 16 * 1024 + 256 * 1024)
        // ...so the next ones, given back as they end, never touch the shared counter.
        lease.give(16 * 1024)
        for _ in 0..<1000 {
            #expect(lease.take(16 * 1024))
            lease.give(16 * 1024)
        }
        #expect(budget.inUse == afterFirst)
        // A large body beyond the credit takes what is missing; returned, all but a quantum goes back.
        #expect(lease.take(8 << 20))
        #expect(budget.inUse >= 8 << 20)
        lease.give(8 << 20)
        #expect(lease.credit == 256 * 1024)
        #expect(budget.inUse == 256 * 1024)
    }

    @Test func twoLeases_ShareOneLimit() {
        let budget = BodyMemoryBudget(limit: 1 << 20)
        let first = BodyMemoryBudget.Lease(budget)
        let second = BodyMemoryBudget.Lease(budget)
        #expect(first.take(900 * 1024))
        // 124 KiB are left, less the first lease's credit: 200 KiB cannot be had.
        #expect(!second.take(200 * 1024))
        #expect(second.take(64 * 1024))
        #expect(budget.inUse <= 1 << 20)
        first.give(900 * 1024)
        #expect(second.take(600 * 1024), "what the first lease gave back is the second's to take")
    }
}

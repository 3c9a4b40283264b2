import Dispatch
import Foundation
@testable import OutboxModel
@testable import OutboxNet
import Synchronization
import Testing

/// Jobs handed to a running loop from other threads: a burst shares one wake-up, so every job
/// queued behind the first must still run, and each one exactly once.
@Suite("Event loop: execute from other threads")
struct EventLoopExecuteTests {
    @Test("bursts from several threads, and jobs queued while the loop runs jobs, all run exactly once")
    func burstsAllRun() async throws {
        let loop = try EventLoop(index: 0, sweepInterval: 1)
        loop.start()
        defer {
            loop.stop()
            loop.join()
        }
        let threads = 4
        let perThread = 2_000
        let total = threads * perThread * 2
        let runs = Mutex([Int](repeating: 0, count: total))
        let allRan = DispatchSemaphore(value: 0)
        let remaining = Atomic(total)
        @Sendable func ran(_ job: Int) {
            runs.withLock { $0[job] += 1 }
            if remaining.subtract(1, ordering: .relaxed).newValue == 0 { allRan.signal() }
        }
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for n in 0..<perThread {
                let job = (thread * perThread + n) * 2
                loop.execute {
                    ran(job)
                    // Queued from the loop thread while it drains its list.
                    loop.execute { ran(job + 1) }
                }
            }
        }
        let finished = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            DispatchQueue.global().async { continuation.resume(returning: allRan.wait(timeout: .now() + 30) == .success) }
        }
        #expect(finished, "\(remaining.load(ordering: .relaxed)) of \(total) jobs never ran")
        #expect(runs.withLock { $0.allSatisfy { $0 == 1 } })
    }

    @Test("jobs queued inside a wake-up batch all run: each loop is woken once the batch ends")
    func jobsQueuedInAWakeUpBatchRun() async throws {
        // Nothing tracked: the loops wait with no timeout, so a wake-up lost to the batch hangs them.
        let loops = try (0..<2).map { try EventLoop(index: $0, sweepInterval: 1) }
        for loop in loops { loop.start() }
        defer {
            for loop in loops {
                // Should the batch have lost a wake-up, `stop` (queued behind the lost jobs) would not wake either.
                loop.wakeUp()
                loop.stop()
                loop.join()
            }
        }
        let total = 200
        let remaining = Atomic(total)
        let allRan = DispatchSemaphore(value: 0)
        WakeUpBatch.run {
            for job in 0..<total {
                loops[job % 2].execute {
                    if remaining.subtract(1, ordering: .relaxed).newValue == 0 { allRan.signal() }
                }
            }
        }
        let finished = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            DispatchQueue.global().async { continuation.resume(returning: allRan.wait(timeout: .now() + 30) == .success) }
        }
        #expect(finished, "\(remaining.load(ordering: .relaxed)) of \(total) jobs never ran")
    }

    final class CountingTarget: WakeUpTarget {
        let wakes = Atomic(0)
        func wakeUp() { wakes.add(1, ordering: .relaxed) }
    }

    @Test("a wake-up batch wakes each target once, after its body, and only for its own thread")
    func aWakeUpBatchWakesEachTargetOnceAfterwards() {
        let first = CountingTarget()
        let second = CountingTarget()
        let elsewhere = CountingTarget()
        #expect(!WakeUpBatch.deferWakeUp(first), "outside a batch the caller wakes at once")
        let otherThreadDeferred = Mutex<Bool?>(nil)
        WakeUpBatch.run {
            #expect(WakeUpBatch.deferWakeUp(first))
            #expect(WakeUpBatch.deferWakeUp(second))
            #expect(WakeUpBatch.deferWakeUp(first))
            let done = DispatchSemaphore(value: 0)
            let thread = Thread {
                let deferred = WakeUpBatch.deferWakeUp(elsewhere)
                otherThreadDeferred.withLock { $0 = deferred }
                done.signal()
            }
            thread.start()
            done.wait()
            #expect(first.wakes.load(ordering: .relaxed) == 0 && second.wakes.load(ordering: .relaxed) == 0)
        }
        #expect(otherThreadDeferred.withLock { $0 } == false, "another thread's wake-ups are not held back")
        #expect(first.wakes.load(ordering: .relaxed) == 1)
        #expect(second.wakes.load(ordering: .relaxed) == 1)
        #expect(!WakeUpBatch.deferWakeUp(first), "the batch is over")
    }

    @Test("a batch inside a batch wakes its targets at its own end, and the outer batch still defers")
    func nestedWakeUpBatches() {
        let outerTarget = CountingTarget()
        let innerTarget = CountingTarget()
        WakeUpBatch.run {
            #expect(WakeUpBatch.deferWakeUp(outerTarget))
            WakeUpBatch.run { #expect(WakeUpBatch.deferWakeUp(innerTarget)) }
            #expect(innerTarget.wakes.load(ordering: .relaxed) == 1)
            #expect(WakeUpBatch.deferWakeUp(outerTarget), "the outer batch ended with the inner one")
            #expect(outerTarget.wakes.load(ordering: .relaxed) == 0)
        }
        #expect(outerTarget.wakes.load(ordering: .relaxed) == 1)
        #expect(innerTarget.wakes.load(ordering: .relaxed) == 1)
    }

    /// Untracks itself at its first sweep and queues a job from there: the loop thread, with
    /// nothing tracked and no descriptor ready, about to wait with no timeout.
    final class QueuesFromSweep: DeadlineTracked {
        let loop: EventLoop
        let ran: @Sendable () -> Void
        init(loop: EventLoop, ran: @escaping @Sendable () -> Void) {
            self.loop = loop
            self.ran = ran
        }
        func checkDeadlines(now: UInt64) {
            loop.untrack(self)
            loop.execute(ran)
        }
    }

    @Test("a job queued from the loop thread itself, outside any job, runs before the loop waits again")
    func aJobQueuedOnTheLoopRunsWithoutAWakeUp() async throws {
        let loop = try EventLoop(index: 0, sweepInterval: 0.01)
        loop.start()
        defer {
            loop.stop()
            loop.join()
        }
        let ran = DispatchSemaphore(value: 0)
        let tracker = LoopBound(value: QueuesFromSweep(loop: loop, ran: { ran.signal() }), loop: loop)
        loop.execute { tracker.loop.track(tracker.value) }
        let finished = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            DispatchQueue.global().async { continuation.resume(returning: ran.wait(timeout: .now() + 30) == .success) }
        }
        #expect(finished, "the job queued from the sweep never ran: the loop waited without looking at its list")
    }
}

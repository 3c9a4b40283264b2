import Foundation
@testable import OutboxNet
import Synchronization
import Testing

/// Tasks that prefer a loop's executor run on that loop's thread: their nonisolated code, the
/// default actors they enter, and what they do after a loop callback resumed them.
@Suite("Loop task executor")
struct LoopTaskExecutorTests {
    /// A default actor, as the replayer is: entered from a task preferring the loop, it runs there.
    actor Counter {
        var steps: [Bool] = []
        func step(on loop: EventLoop) { steps.append(loop.isCurrent) }
    }

    @Test("a preferring task, the actor it enters and its code after a loop callback all run on the loop thread")
    func preferringTaskRunsOnTheLoop() async throws {
        let loop = try EventLoop(index: 0, sweepInterval: 1)
        loop.start()
        defer {
            loop.stop()
            loop.join()
        }
        let executor = LoopTaskExecutor(loop: loop)
        let counter = Counter()
        #expect(!loop.isCurrent, "the test itself is not on the loop")
        let seen = await Task(executorPreference: executor) { () async -> [Bool] in
            var seen = [loop.isCurrent]
            await counter.step(on: loop)
            // Resumed by a job on the loop, as a response arriving resumes an exchange.
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async { loop.execute { continuation.resume() } }
            }
            seen.append(loop.isCurrent)
            await counter.step(on: loop)
            return seen
        }.value
        #expect(seen == [true, true])
        #expect(await counter.steps == [true, true])
        let plain = await Task { loop.isCurrent }.value
        #expect(!plain, "a task without the preference runs elsewhere")
    }
}

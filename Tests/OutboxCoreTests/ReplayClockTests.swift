import Foundation
@testable import OutboxConfig
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxReplay
import Testing

@Suite("Replay clocks: manual and system")
struct ReplayClockTests {
    @Test("sleeping until a reached deadline returns at once")
    func reachedDeadlineReturns() async throws {
        let clock = ManualReplayClock(now: 1_000)
        try await clock.sleep(until: 1_000)
        try await clock.sleep(until: 0)
        #expect(clock.sleepingDeadlines.isEmpty)
    }

    @Test("advancing wakes exactly the sleepers whose deadline has passed")
    func advanceWakesDueSleepers() async throws {
        let clock = ManualReplayClock(now: 0)
        let early = Task { try await clock.sleep(until: 100); return clock.nowMilliseconds }
        let late = Task { try await clock.sleep(until: 250); return clock.nowMilliseconds }
        await clock.waitForSleepers(2)
        #expect(clock.sleepingDeadlines == [100, 250])
        clock.advance(by: 99)
        #expect(clock.sleepingDeadlines == [100, 250])
        clock.advance(by: 101)
        #expect(try await early.value == 200)
        #expect(clock.sleepingDeadlines == [250])
        #expect(clock.advanceToNextDeadline())
        #expect(try await late.value == 250)
        #expect(!clock.advanceToNextDeadline())
    }

    @Test("a cancelled sleep throws CancellationError and leaves no sleeper behind")
    func cancelledSleepThrows() async {
        let clock = ManualReplayClock(now: 0)
        let sleeper = Task { try await clock.sleep(until: 1_000) }
        await clock.waitForSleepers(1)
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleepingDeadlines.isEmpty)
    }

    @Test("a sleep started in an already cancelled task throws at once")
    func sleepInCancelledTaskThrows() async {
        let clock = ManualReplayClock(now: 0)
        let sleeper = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(until: 1_000)
        }
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleepingDeadlines.isEmpty)
    }

    @Test("a replay loop on the manual clock backs off 503, 503 then completes, without real sleeping")
    func backoffDrivenByManualClock() async throws {
        let clock = ManualReplayClock(now: 10_000)
        let policy = RetryPolicy(OutboxConfig.Retry(preset: .linear))
        let replay = Task {
            var random = ReplayTestRandom(seed: 3)
            var state = OperationState()
            var attemptTimes: [Int64] = []
            for status in [503, 503, 201] {
                if let next = state.nextAttemptAt { try await clock.sleep(until: next) }
                let now = clock.nowMilliseconds
                attemptTimes.append(now)
                state = ReplayTransition.startAttempt(current: state, now: now)
                let response = StoredResponse(status: status, headers: [:], body: [])
                state = ReplayTransition.nextState(
                    current: state, outcome: AttemptOutcome(response: response, retryableStatuses: policy.retryableStatuses),
                    now: now, policy: policy, retryAfter: nil, random: &random)
            }
            return (state, attemptTimes)
        }
        for _ in 0..<2 {
            await clock.waitForSleepers(1)
            #expect(clock.advanceToNextDeadline())
        }
        let (state, attemptTimes) = try await replay.value
        #expect(state.status == .completed)
        #expect(attemptTimes == [10_000, 15_000, 20_000])
    }

    @Test("the system clock reads wall time and sleeps until the deadline")
    func systemClock() async throws {
        let clock = SystemReplayClock()
        let wall = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(abs(clock.nowMilliseconds - wall) < 1_000)
        let deadline = clock.nowMilliseconds + 20
        try await clock.sleep(until: deadline)
        #expect(clock.nowMilliseconds >= deadline)
        try await clock.sleep(until: 0)
    }
}

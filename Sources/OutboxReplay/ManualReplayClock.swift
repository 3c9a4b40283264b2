import Foundation
import Synchronization

/// A clock that moves only when a test says so: `advance(by:)` resumes every sleeper whose
/// deadline has passed, in deadline order; `waitForSleepers(_:)` lets a test wait, without
/// sleeping, until the code under test has gone to sleep. The deadlines of attempts in flight
/// (`sleep(untilAttemptDeadline:)`) are kept apart: `sleepingDeadlines`, `waitForSleepers` and
/// `advanceToNextDeadline` see only the replayer's own waits, `attemptDeadlines` and
/// `waitForAttemptDeadlines` the others; `advance(by:)` wakes both.
public final class ManualReplayClock: ReplayClock {
    private struct Sleeper {
        var id: UInt64
        var deadline: Int64
        var isAttemptDeadline: Bool
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct SleeperCountWaiter {
        var count: Int
        var attemptDeadlines: Bool
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now: Int64
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
        /// Sleeps cancelled before they registered (cancellation raced the registration).
        var cancelledEarly: Set<UInt64> = []
        var countWaiters: [SleeperCountWaiter] = []

        func count(attemptDeadlines: Bool) -> Int {
            sleepers.count { $0.isAttemptDeadline == attemptDeadlines }
        }

        /// Waiters satisfied by the current number of sleepers, removed from the list.
        mutating func satisfiedCountWaiters() -> [CheckedContinuation<Void, Never>] {
            let waits = count(attemptDeadlines: false), deadlines = count(attemptDeadlines: true)
            func satisfied(_ waiter: SleeperCountWaiter) -> Bool { waiter.count <= (waiter.attemptDeadlines ? deadlines : waits) }
            let ready = countWaiters.filter(satisfied)
            countWaiters.removeAll(where: satisfied)
            return ready.map(\.continuation)
        }
    }

    private let state: Mutex<State>

    /// A clock reading `now` (ms since the epoch) until advanced.
    public init(now: Int64 = 1_800_000_000_000) {
        state = Mutex(State(now: now))
    }

    /// Now, in milliseconds since the epoch.
    public var nowMilliseconds: Int64 {
        state.withLock { $0.now }
    }

    /// Deadlines of the tasks currently asleep, earliest first (attempt deadlines aside).
    public var sleepingDeadlines: [Int64] {
        state.withLock { $0.sleepers.filter { !$0.isAttemptDeadline }.map(\.deadline).sorted() }
    }

    /// Deadlines of the attempts in flight that something sleeps until, earliest first.
    public var attemptDeadlines: [Int64] {
        state.withLock { $0.sleepers.filter(\.isAttemptDeadline).map(\.deadline).sorted() }
    }

    /// Suspends until the clock is advanced to `deadline` or the task is cancelled.
    public func sleep(until deadline: Int64) async throws {
        try await sleep(until: deadline, isAttemptDeadline: false)
    }

    /// `sleep(until:)`, counted among the attempt deadlines.
    public func sleep(untilAttemptDeadline deadline: Int64) async throws {
        try await sleep(until: deadline, isAttemptDeadline: true)
    }

    private func sleep(until deadline: Int64, isAttemptDeadline: Bool) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Action { case resume, cancel, wait([CheckedContinuation<Void, Never>]) }
                let action: Action = state.withLock { state in
                    if state.cancelledEarly.remove(id) != nil { return .cancel }
                    if deadline <= state.now { return .resume }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, isAttemptDeadline: isAttemptDeadline,
                                                  continuation: continuation))
                    return .wait(state.satisfiedCountWaiters())
                }
                switch action {
                case .resume: continuation.resume()
                case .cancel: continuation.resume(throwing: CancellationError())
                case .wait(let waiters): waiters.forEach { $0.resume() }
                }
            }
        } onCancel: {
            let sleeper: Sleeper? = state.withLock { state in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else {
                    state.cancelledEarly.insert(id)
                    return nil
                }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
        // A sleep that finished normally never consults its early-cancel mark; drop it.
        state.withLock { _ = $0.cancelledEarly.remove(id) }
    }

    /// Moves the clock forward by `milliseconds` (≥ 0) and wakes every sleeper whose deadline
    /// is now reached, earliest deadline first.
    public func advance(by milliseconds: Int64) {
        let due: [Sleeper] = state.withLock { state in
            state.now += max(0, milliseconds)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        due.forEach { $0.continuation.resume() }
    }

    /// Moves the clock to the earliest sleeper's deadline and wakes it (and any sleeper with
    /// the same deadline); returns false when nobody sleeps.
    @discardableResult
    public func advanceToNextDeadline() -> Bool {
        let step: Int64? = state.withLock { state in
            state.sleepers.filter { !$0.isAttemptDeadline }.map(\.deadline).min().map { max(0, $0 - state.now) }
        }
        guard let step else { return false }
        advance(by: step)
        return true
    }

    /// Returns once at least `count` tasks are asleep on this clock (attempt deadlines aside).
    public func waitForSleepers(_ count: Int = 1) async {
        await waitFor(count, attemptDeadlines: false)
    }

    /// Returns once at least `count` attempt deadlines are slept until.
    public func waitForAttemptDeadlines(_ count: Int = 1) async {
        await waitFor(count, attemptDeadlines: true)
    }

    private func waitFor(_ count: Int, attemptDeadlines: Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state in
                if state.count(attemptDeadlines: attemptDeadlines) >= count { return true }
                state.countWaiters.append(SleeperCountWaiter(count: count, attemptDeadlines: attemptDeadlines,
                                                             continuation: continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }
}

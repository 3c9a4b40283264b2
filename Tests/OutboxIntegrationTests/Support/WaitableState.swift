import Dispatch
import Synchronization

/// A lock-protected value that tasks and plain threads can wait on until a predicate holds.
/// Every wait has a timeout: the harness must turn a missing event into a failure, never a hang.
final class WaitableState<Value: Sendable>: Sendable {
    private struct Waiter: Sendable {
        let id: UInt64
        /// Returns true when the value satisfied the waiter, which has then been resumed.
        let offer: @Sendable (Value) -> Bool
        let expire: @Sendable (Value) -> Void
    }

    private struct Inner: Sendable {
        var value: Value
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
    }

    private let inner: Mutex<Inner>

    /// Creates the state holding `value`.
    init(_ value: Value) {
        inner = Mutex(Inner(value: value))
    }

    /// A snapshot of the current value.
    var value: Value {
        inner.withLock { $0.value }
    }

    /// Mutates the value under the lock, then wakes every waiter whose predicate now holds.
    @discardableResult
    func update<R: Sendable>(_ body: (inout Value) -> R) -> R {
        let (result, satisfied) = inner.withLock { state in
            let result = body(&state.value)
            let snapshot = state.value
            // Resuming a continuation or signalling a semaphore never re-enters this lock,
            // so doing it while holding the lock is safe and keeps wake-ups ordered.
            var satisfied: [Waiter] = []
            state.waiters.removeAll { waiter in
                guard waiter.offer(snapshot) else { return false }
                satisfied.append(waiter)
                return true
            }
            return (result, satisfied)
        }
        // Released only here, outside the lock: the woken task may already have run on
        // another thread and let go of its objects, so a waiter's closures can hold the last
        // reference to something whose deinit reads this state (a ChildProcess does).
        withExtendedLifetime(satisfied) {}
        return result
    }

    /// Suspends until `predicate` returns a value, or throws a `HarnessError` made by
    /// `describeTimeout` from the value current at the deadline.
    func wait<R: Sendable>(
        timeout: Duration,
        describeTimeout: @escaping @Sendable (Value) -> String,
        until predicate: @escaping @Sendable (Value) -> R?
    ) async throws -> R {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
            let registration: (immediate: R?, id: UInt64) = inner.withLock { state in
                if let ready = predicate(state.value) { return (ready, 0) }
                let id = state.nextWaiterID
                state.nextWaiterID += 1
                state.waiters.append(Waiter(
                    id: id,
                    offer: { value in
                        guard let ready = predicate(value) else { return false }
                        continuation.resume(returning: ready)
                        return true
                    },
                    expire: { value in
                        continuation.resume(throwing: HarnessError(describeTimeout(value)))
                    }
                ))
                return (nil, id)
            }
            if let ready = registration.immediate {
                continuation.resume(returning: ready)
                return
            }
            Task {
                try? await Task.sleep(for: timeout)
                self.expire(waiterID: registration.id)
            }
        }
    }

    /// Blocks the calling thread until `predicate` returns a value; nil when `timeout` passes
    /// first. For harness threads (the test upstream), never for test code.
    func waitBlocking<R: Sendable>(timeout: Duration, until predicate: @escaping @Sendable (Value) -> R?) -> R? {
        let semaphore = DispatchSemaphore(value: 0)
        let slot = ResultSlot<R>()
        let id: UInt64? = inner.withLock { state in
            if let ready = predicate(state.value) {
                slot.store(ready)
                return nil
            }
            let id = state.nextWaiterID
            state.nextWaiterID += 1
            state.waiters.append(Waiter(
                id: id,
                offer: { value in
                    guard let ready = predicate(value) else { return false }
                    slot.store(ready)
                    semaphore.signal()
                    return true
                },
                expire: { _ in semaphore.signal() }
            ))
            return id
        }
        guard let id else { return slot.load() }
        let (seconds, attoseconds) = timeout.components
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        if semaphore.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds))) == .timedOut {
            // The waiter may have been satisfied between the timeout and this removal; the
            // slot tells which happened. If not, the value gets one last look.
            let (last, removed): (R?, [Waiter]) = inner.withLock { state in
                let removed = state.waiters.filter { $0.id == id }
                state.waiters.removeAll { $0.id == id }
                return (slot.load() ?? predicate(state.value), removed)
            }
            withExtendedLifetime(removed) {}   // released outside the lock, as in update
            return last
        }
        return slot.load()
    }

    private func expire(waiterID: UInt64) {
        let expired: (Waiter, Value)? = inner.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.id == waiterID }) else { return nil }
            return (state.waiters.remove(at: index), state.value)
        }
        // One last look at the deadline: a waiter whose predicate depends on more than the
        // value (a clock, a file) may hold now although no update woke it.
        if let (waiter, value) = expired, !waiter.offer(value) {
            waiter.expire(value)
        }
    }
}

/// A write-once cell a waiter's callback fills from whichever thread satisfies it.
private final class ResultSlot<R: Sendable>: Sendable {
    private let cell = Mutex<R?>(nil)

    func store(_ value: R) {
        cell.withLock { $0 = value }
    }

    func load() -> R? {
        cell.withLock { $0 }
    }
}

import Synchronization

/// Tasks waiting for a condition on a scripted source's state, resumed by the change that makes
/// it true: a test awaits the replayer's records instead of spinning against a deadline, which a
/// starved cooperative pool can overrun. The caller's test time limit bounds a wait for a change
/// that never comes.
final class ConditionWaiters: Sendable {
    private let waiting = Mutex<[(condition: @Sendable () -> Bool, resume: CheckedContinuation<Void, Never>)]>([])

    /// Returns once `condition` holds: at once, or after the `changed()` that makes it true.
    func waitUntil(_ condition: @escaping @Sendable () -> Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // Checked under the lock: a change after this check finds the waiter in the list.
            let holds = waiting.withLock { list -> Bool in
                if condition() { return true }
                list.append((condition, continuation))
                return false
            }
            if holds { continuation.resume() }
        }
    }

    /// The state changed: resumes every waiter whose condition now holds. Call it after the
    /// change, outside the lock that guards the state.
    func changed() {
        let ready = waiting.withLock { list -> [CheckedContinuation<Void, Never>] in
            var ready: [CheckedContinuation<Void, Never>] = []
            list.removeAll { waiter in
                guard waiter.condition() else { return false }
                ready.append(waiter.resume)
                return true
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }
}

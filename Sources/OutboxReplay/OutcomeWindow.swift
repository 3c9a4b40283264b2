import Synchronization

/// Bounds how far one lane's attempt outcomes may trail the disk.
///
/// A lane records each outcome (the final state, or the retry it schedules) behind its own
/// back: the group commit writes it while the lane goes on, so one sync covers many
/// deliveries. A `kill -9` forgets every outcome not yet on disk, and those operations are sent
/// again after the restart. The window caps them: the lane ``track()``s each outcome it hands
/// to the log, the log's confirmation (or its failure) settles it, and before its next send the
/// lane ``waitForRoom()``s while `capacity` outcomes are unsettled. One lane sends one operation
/// at a time, so one window has at most one waiter for room.
///
/// The log may hold the outcomes back to share a sync with later ones; the window calls `hurry`
/// once a quarter of its capacity was tracked since it last did, and before a lane waits for room,
/// so the sync runs while the lane sends on instead of the lane stopping for it. A sync may have
/// to wait for the one before it: at a half, that outlasted the deliveries left before the
/// window was full often enough to stop one lane on loopback.
package final class OutcomeWindow: Sendable {
    /// The contract's bound: after a `kill -9`, per lane, at most the operation in flight plus
    /// 32 operations whose outcome was not yet on disk are sent again. A lane sends only while
    /// fewer than this many outcomes are unwritten, so at any instant the operation in flight
    /// and the unwritten outcomes are at most 32 together: within that bound. Large enough
    /// that the lane rarely waits: a sync takes about as long as one delivery at real-world
    /// latency, and covers every outcome written meanwhile.
    package static let redeliveryBound = 32

    private struct State {
        var unwritten = 0
        /// Tracked since `hurry` last ran.
        var unhurried = 0
        var roomWaiters: [CheckedContinuation<Void, Never>] = []
    }

    package let capacity: Int
    private let hurry: @Sendable () -> Void
    private let state = Mutex(State())

    /// - Parameter hurry: asks the log to write the held-back outcomes now.
    package init(capacity: Int = OutcomeWindow.redeliveryBound, hurry: @escaping @Sendable () -> Void = {}) {
        self.capacity = max(1, capacity)
        self.hurry = hurry
    }

    /// Resets the count of outcomes tracked since the last hurry; true when there were some.
    private static func takeUnhurried(_ state: inout State) -> Bool {
        defer { state.unhurried = 0 }
        return state.unhurried > 0
    }

    /// Outcomes tracked and not yet settled.
    package var unwritten: Int { state.withLock { $0.unwritten } }

    /// Callers held in ``waitForRoom()`` (tests look, to know a lane is held).
    package var waiting: Int { state.withLock { $0.roomWaiters.count } }

    /// Returns once fewer than `capacity` outcomes are unwritten: at once in the common case,
    /// without leaving the caller's actor (the lane asks before every send).
    package func waitForRoom(isolation: isolated (any Actor)? = #isolation) async {
        let capacity = self.capacity
        if state.withLock({ $0.unwritten < capacity }) { return }
        await withCheckedContinuation(isolation: isolation) { (continuation: CheckedContinuation<Void, Never>) in
            // Settled between the look above and now: go on rather than wait for the next one.
            let (admitted, hurrying) = state.withLock { state -> (Bool, Bool) in
                if state.unwritten < capacity { return (true, false) }
                state.roomWaiters.append(continuation)
                return (false, Self.takeUnhurried(&state))
            }
            if hurrying { hurry() }
            if admitted { continuation.resume() }
        }
    }

    /// Counts one more outcome as unwritten and returns what settles it: the log calls that
    /// once the record is on disk, or once writing it failed (a failed write must not hold the
    /// lane forever; the failure itself is logged where it happens). Settling twice counts once.
    package func track() -> @Sendable () -> Void {
        let quarter = max(1, capacity / 4)
        let hurrying = state.withLock { state -> Bool in
            state.unwritten += 1
            state.unhurried += 1
            return state.unhurried >= quarter && Self.takeUnhurried(&state)
        }
        if hurrying { hurry() }
        let once = Once()
        return { [self] in
            if once.first() { settle() }
        }
    }

    private final class Once: Sendable {
        private let done = Atomic<Bool>(false)
        func first() -> Bool { !done.exchange(true, ordering: .relaxed) }
    }

    private func settle() {
        let capacity = self.capacity
        let woken = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.unwritten -= 1
            guard state.unwritten < capacity, !state.roomWaiters.isEmpty else { return nil }
            return state.roomWaiters.removeFirst()
        }
        woken?.resume()
    }
}

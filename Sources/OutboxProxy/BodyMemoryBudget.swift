import Synchronization

/// `limits.bodyMemoryBytes`: the request-body bytes that all exchanges of the process may
/// hold in memory together. Beyond it an exchange keeps its body in a spill file (see
/// ``RequestBodyBuffer``), so memory does not grow with the number of uploads in flight.
///
/// One atomic counter shared by every loop. A loop takes from it through its ``Lease``, which
/// keeps a little credit of its own, so that the small bodies of ordinary traffic reserve and
/// return without touching the shared counter at all: no cache line bounces between the
/// loops on the forwarding path.
final class BodyMemoryBudget: Sendable {
    let limit: Int
    private let used = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = max(0, limit)
    }

    /// Bytes taken now, by exchanges and as the loops' credit.
    var inUse: Int { used.load(ordering: .relaxed) }

    /// Takes `bytes` if they fit under the limit and returns true; else takes nothing.
    func reserve(_ bytes: Int) -> Bool {
        guard bytes > 0 else { return true }
        var current = used.load(ordering: .relaxed)
        while true {
            guard bytes <= limit - current else { return false }
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + bytes,
                                                             ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    /// Gives back `bytes` taken by ``reserve(_:)``.
    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        used.subtract(bytes, ordering: .relaxed)
    }

    /// One loop's share of the budget: touched only on that loop's thread.
    ///
    /// It takes from the budget a `quantum` ahead of what an exchange asks for and keeps what
    /// exchanges give back, up to two quanta, so the shared counter moves about once per
    /// quantum of body bytes rather than twice per request. The credit counts as used: a loop
    /// holds at most two quanta that no exchange uses (256 KiB each with the default budget,
    /// 1/32 of the budget when that is smaller).
    final class Lease {
        let budget: BodyMemoryBudget
        private let quantum: Int
        /// Taken from the budget and not handed to an exchange.
        private(set) var credit = 0

        init(_ budget: BodyMemoryBudget) {
            self.budget = budget
            quantum = min(256 * 1024, budget.limit / 32)
        }

        /// Takes `bytes` for an exchange and returns true, or returns false when the budget
        /// cannot spare them (nothing is taken then).
        func take(_ bytes: Int) -> Bool {
            if bytes <= credit {
                credit -= bytes
                return true
            }
            let missing = bytes - credit
            if budget.reserve(missing + quantum) {
                credit += quantum
            } else if !budget.reserve(missing) {
                return false
            }
            credit -= bytes - missing
            return true
        }

        /// Takes back `bytes` an exchange no longer holds.
        func give(_ bytes: Int) {
            credit += bytes
            if credit > 2 * quantum {
                budget.release(credit - quantum)
                credit = quantum
            }
        }
    }
}

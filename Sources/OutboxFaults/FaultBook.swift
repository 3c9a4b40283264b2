import OutboxModel
import Synchronization

/// The fault rules in force, shared by every event loop (direct forwards), the replayer's
/// transport, the reachability probes and the admin API. Rules are kept in the order added:
/// the first matching rule decides, so a test can put a narrow rule before a broad one.
///
/// With no rule, `decide` costs one relaxed atomic load: the forwarding path pays nothing for
/// a feature it is not using.
package final class FaultBook: Sendable {
    private struct Entry {
        var rule: FaultRule
        var matched = 0
        var applied = 0
        var random: SeededRandom

        func exhausted(now: Int64) -> Bool {
            rule.times.map { matched >= $0 } ?? false || rule.hasEnded(now: now)
        }
    }

    private let entries = Mutex<[Entry]>([])
    private let count = Atomic<Int>(0)

    package init() {}

    /// What to do with a request about to go upstream: nil to send it for real. Counts the
    /// request as matched by the first rule that covers it, and as applied when that rule's
    /// chance says so; an exhausted or ended rule matches nothing.
    /// `now` (ms since the epoch) defaults to the clock, read only when a rule exists.
    package func decide(origin: Origin, method: String, target: String, kind: UpstreamRequestKind,
                       now: Int64? = nil) -> FaultRule.Action? {
        guard count.load(ordering: .relaxed) > 0 else { return nil }
        let now = now ?? WallClock.millis()
        return entries.withLock { entries in
            guard let index = entries.firstIndex(where: {
                !$0.exhausted(now: now) && $0.rule.matches(origin: origin, method: method, target: target, kind: kind)
            }) else { return nil }
            entries[index].matched += 1
            let probability = entries[index].rule.probability
            // One draw per matching request, even at probability 1: the sequence then depends on
            // the requests alone, never on the rule's chance.
            let draw = entries[index].random.nextUnitInterval()
            guard draw < probability else { return nil }
            entries[index].applied += 1
            return entries[index].rule.action
        }
    }

    /// Whether an active `offline` rule covers `origin` (its probes fail meanwhile). Method and
    /// path play no part: a probe has neither.
    package func holdsOffline(_ origin: Origin, now: Int64? = nil) -> Bool {
        guard count.load(ordering: .relaxed) > 0 else { return false }
        let now = now ?? WallClock.millis()
        return entries.withLock { entries in
            entries.contains {
                $0.rule.action == .offline && !$0.exhausted(now: now) && ($0.rule.origin == nil || $0.rule.origin == origin)
            }
        }
    }

    /// The most rules the book holds (SPEC §6): every upstream request scans them under one
    /// lock, and each costs memory, so a script adding rules in a loop must not grow either
    /// without end.
    package static let maxRules = 1_000

    /// What `add` did.
    package enum Addition: Sendable, Equatable {
        case added
        /// A rule with this id exists; nothing was added.
        case idTaken
        /// The book holds `maxRules` rules; nothing was added.
        case full
    }

    /// Adds `rule` unless its id is taken or the book is full. Exhausted and ended rules count
    /// until they are removed: they stay listed with their counters.
    package func add(_ rule: FaultRule) -> Addition {
        entries.withLock { entries in
            guard !entries.contains(where: { $0.rule.id == rule.id }) else { return .idTaken }
            guard entries.count < Self.maxRules else { return .full }
            entries.append(Entry(rule: rule, random: SeededRandom(seed: rule.seed)))
            count.store(entries.count, ordering: .relaxed)
            return .added
        }
    }

    /// Removes the rule `id`; false when there is none.
    package func remove(_ id: String) -> Bool {
        entries.withLock { entries in
            guard let index = entries.firstIndex(where: { $0.rule.id == id }) else { return false }
            entries.remove(at: index)
            count.store(entries.count, ordering: .relaxed)
            return true
        }
    }

    /// Removes every rule; returns how many there were.
    package func removeAll() -> Int {
        entries.withLock { entries in
            let removed = entries.count
            entries.removeAll()
            count.store(0, ordering: .relaxed)
            return removed
        }
    }

    /// Every rule in the order added, rendered with its counters.
    package func rendered(now: Int64 = WallClock.millis()) -> [JSON] {
        entries.withLock { entries in
            entries.map { $0.rule.rendered(matched: $0.matched, applied: $0.applied, exhausted: $0.exhausted(now: now)) }
        }
    }

    /// One rule rendered, or nil.
    package func rendered(_ id: String, now: Int64 = WallClock.millis()) -> JSON? {
        entries.withLock { entries in
            entries.first { $0.rule.id == id }.map { $0.rule.rendered(matched: $0.matched, applied: $0.applied, exhausted: $0.exhausted(now: now)) }
        }
    }
}

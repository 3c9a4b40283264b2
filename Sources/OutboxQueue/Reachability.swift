import OutboxModel
import OutboxTelemetry
import Synchronization

/// Which origins are reachable, and the probes that bring an offline one back.
///
/// An origin goes offline when connecting fails, when the connection drops before a complete
/// response head, when no head arrives in time, or when it answers with an
/// `unavailableStatuses` status. While offline *and holding stored work* it is probed every
/// `probeIntervalSeconds` (a TCP connect, or `GET probePath` expecting a status below 500);
/// the first success marks it online and calls `onOnline`, which starts its replay. An origin
/// with nothing stored is not probed (clients could otherwise make Outbox scan any port they
/// name, forever) and does not hold traffic back: it shows as offline with its last error, and
/// the next request simply tries it again. Such an origin is forgotten (no status entry, no
/// metric series) `forgetAfterSeconds` after anything last touched it; origins with stored work
/// and the configured upstream (`register(_:pinned:)`) are kept. Reads are a lock and a
/// dictionary lookup: cheap enough for every forwarded request, and none at all while no
/// origin is probed (`isOnline`) or offline (`markOnline`). A probe Outbox could not start (no
/// descriptor for its socket: ``ProbeOutcome/notProbed(_:)``) changes nothing: it is tried
/// again at the next interval, and never marks an origin offline.
public final class Reachability: Sendable {
    private struct Entry {
        var online = true
        var lastError: String?
        var nextProbeAt: Int64?
        var probing = false
        /// When a request, the queue or a probe round last touched it (ms since the epoch).
        var lastSeen: Int64
        /// Never forgotten: the configured upstream.
        var pinned = false
        /// Its last answer to a replay refused the credentials (`replay.authStatuses`).
        var authRequired = false
    }

    private let state = Mutex<[Origin: Entry]>([:])
    /// How many entries are offline, changed under `state`'s lock: while it is zero,
    /// `markOnline`, which every forwarded request calls, needs no lock and no lookup.
    private let offlineCount = Atomic<Int>(0)
    /// How many entries are probed (offline with stored work), changed under `state`'s lock:
    /// only those hold traffic back, so while it is zero `isOnline` needs no lock either.
    private let probingCount = Atomic<Int>(0)
    private let interval: Double
    private let forgetAfterMillis: Int64
    private let probe: @Sendable (Origin) async -> ProbeOutcome
    private let onOnline = Mutex<(@Sendable (Origin) -> Void)?>(nil)
    /// Whether the queue holds unfinished operations for an origin; nil (no queue attached):
    /// every offline origin counts as having some, and is probed.
    private let hasStoredWork = Mutex<(@Sendable (Origin) -> Bool)?>(nil)
    private let sleep: @Sendable (Double) async -> Void
    private let now: @Sendable () -> Int64
    /// Where an origin going off- or online is announced (`event: origin`).
    private let events: EventHub?

    /// - Parameters:
    ///   - probe: whether the origin answers (see `TCPProbe` and the GET probe).
    ///   - sleep, now: injectable so tests need not wait for real intervals.
    package init(probeIntervalSeconds: Double, forgetAfterSeconds: Double = 300,
                probe: @escaping @Sendable (Origin) async -> ProbeOutcome,
                sleep: @escaping @Sendable (Double) async -> Void = Reachability.sleep(seconds:),
                now: @escaping @Sendable () -> Int64 = { WallClock.millis() }, events: EventHub? = nil) {
        self.events = events
        // A zero interval would make the prober spin against a dead origin.
        interval = max(0.05, probeIntervalSeconds)
        forgetAfterMillis = WallClock.milliseconds(forgetAfterSeconds)
        self.probe = probe
        self.sleep = sleep
        self.now = now
    }

    /// A probe that only says yes or no (true: the origin answers); it is always able to probe.
    package convenience init(probeIntervalSeconds: Double, forgetAfterSeconds: Double = 300,
                             probe: @escaping @Sendable (Origin) async -> Bool,
                             sleep: @escaping @Sendable (Double) async -> Void = Reachability.sleep(seconds:),
                             now: @escaping @Sendable () -> Int64 = { WallClock.millis() }, events: EventHub? = nil) {
        self.init(probeIntervalSeconds: probeIntervalSeconds, forgetAfterSeconds: forgetAfterSeconds,
                  probe: { ProbeOutcome(answered: await probe($0)) }, sleep: sleep, now: now, events: events)
    }

    /// The real wait between probes. Cancelled, the sleep only ends early: the next probe comes sooner.
    package static func sleep(seconds: Double) async {
        try? await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1e9))
    }

    /// Called (on a probe task) each time an offline origin comes back.
    public func setOnOnline(_ handler: @escaping @Sendable (Origin) -> Void) {
        onOnline.withLock { $0 = handler }
    }

    /// Tells the origin's stored work apart from none (see the type's comment); the queue sets
    /// it when it opens. Called without any of this object's locks held.
    package func setHasStoredWork(_ check: @escaping @Sendable (Origin) -> Bool) {
        hasStoredWork.withLock { $0 = check }
    }

    private func storedWork(for origin: Origin) -> Bool {
        hasStoredWork.withLock { $0 }?(origin) ?? true
    }

    /// Whether requests to `origin` should be sent: false only while it is offline and probed
    /// (it holds stored work, which a new write must not overtake and whose replay the probe
    /// starts). An origin that failed with nothing stored is tried again by the next request.
    public func isOnline(_ origin: Origin) -> Bool {
        if probingCount.load(ordering: .acquiring) == 0 { return true }
        return state.withLock { map in
            guard var entry = map[origin] else { return true }
            if !entry.online {
                entry.lastSeen = now()
                map[origin] = entry
            }
            return entry.online || !entry.probing
        }
    }

    /// Records a failure that means "unreachable"; starts probing when the origin holds stored
    /// work and no probe runs yet. Returns whether the origin was online until now (the
    /// moment worth a log line).
    @discardableResult
    public func markOffline(_ origin: Origin, reason: String) -> Bool {
        // Asked before the lock: the queue answers under its index's lock.
        let hasWork = storedWork(for: origin)
        let (startProbe, wasOnline) = state.withLock { map -> (Bool, Bool) in
            var entry = map[origin] ?? Entry(lastSeen: now())
            let wasOnline = entry.online
            if wasOnline { offlineCount.add(1, ordering: .releasing) }
            entry.online = false
            entry.lastError = reason
            entry.lastSeen = now()
            let start = !entry.probing && hasWork
            if start { beginProbing(&entry) }
            map[origin] = entry
            return (start, wasOnline)
        }
        if startProbe {
            Task { await self.probeUntilOnline(origin) }
        }
        if wasOnline { announce(origin, online: false, lastError: reason) }
        return wasOnline
    }

    /// The queue stored work for `origin`: an offline origin is probed from now on (and holds
    /// new writes back, so that none overtakes it), as if it had failed with the work stored.
    package func workStored(for origin: Origin) {
        guard offlineCount.load(ordering: .acquiring) > 0 else { return }
        let start = state.withLock { map -> Bool in
            guard var entry = map[origin], !entry.online, !entry.probing else { return false }
            beginProbing(&entry)
            entry.lastSeen = now()
            map[origin] = entry
            return true
        }
        if start {
            Task { await self.probeUntilOnline(origin) }
        }
    }

    /// Under `state`'s lock.
    private func beginProbing(_ entry: inout Entry) {
        entry.probing = true
        entry.nextProbeAt = now() + Int64(interval * 1000)
        probingCount.add(1, ordering: .releasing)
    }

    /// Ends `origin`'s probing (under `state`'s lock, from its probe task only).
    private func endProbing(_ origin: Origin) {
        state.withLock { map in
            guard var entry = map[origin], entry.probing else { return }
            entry.probing = false
            entry.nextProbeAt = nil
            entry.lastSeen = now()
            map[origin] = entry
            probingCount.subtract(1, ordering: .releasing)
        }
    }

    /// Records that the origin answered (a forwarded request or a replay got a response).
    public func markOnline(_ origin: Origin) {
        guard offlineCount.load(ordering: .acquiring) > 0 else { return }
        let cameBack = state.withLock { map -> Bool in
            guard var entry = map[origin], !entry.online else { return false }
            offlineCount.subtract(1, ordering: .releasing)
            entry.online = true
            entry.nextProbeAt = nil
            entry.lastSeen = now()
            map[origin] = entry
            return true
        }
        if cameBack {
            announce(origin, online: true, lastError: nil)
            onOnline.withLock { $0 }?(origin)
        }
    }

    /// Probes `origin` once, now: true when it answers; otherwise it is marked offline with
    /// `failure` as its last error and probed on its interval from then on. A probe Outbox could
    /// not start is no answer either way: it is tried again after the interval until it can be.
    public func probeOnce(_ origin: Origin, failure: String) async -> Bool {
        while true {
            switch await probe(origin) {
            case .answered:
                return true
            case .unanswered:
                markOffline(origin, reason: failure)
                return false
            case .notProbed:
                await sleep(interval)
            }
        }
    }

    private func announce(_ origin: Origin, online: Bool, lastError: String?) {
        events?.publish("origin", .object([("origin", .string(origin.description)), ("online", .bool(online)),
                                           ("lastError", .string(lastError))]))
    }

    /// Every origin seen so far, for `/admin/status`.
    public var statuses: [OriginStatus] {
        state.withLock { map in
            map.map { OriginStatus(origin: $0.key, online: $0.value.online, lastError: $0.value.lastError,
                                   nextProbeAt: $0.value.online ? nil : $0.value.nextProbeAt, authRequired: $0.value.authRequired) }
                .sorted { $0.origin.description < $1.origin.description }
        }
    }

    /// Whether the origin's last answer to a replay refused its credentials (SPEC §10): set by
    /// a status in `replay.authStatuses`, cleared by any other answer. It is shown, and kept
    /// with the origin, which is not forgotten while it holds work anyway.
    public func setAuthRequired(_ origin: Origin, _ required: Bool) {
        state.withLock { map in
            if map[origin]?.authRequired == required || (map[origin] == nil && !required) { return }
            var entry = map[origin] ?? Entry(lastSeen: now())
            entry.authRequired = required
            map[origin] = entry
        }
    }

    /// Makes an origin known (online) so that `/admin/status` lists it before any failure;
    /// a `pinned` one (the configured upstream) is never forgotten.
    public func register(_ origin: Origin, pinned: Bool = false) {
        state.withLock { map in
            var entry = map[origin] ?? Entry(lastSeen: now())
            entry.pinned = entry.pinned || pinned
            map[origin] = entry
        }
    }

    /// Forgets the origins that hold no stored work, are not pinned and were not touched for
    /// `forgetAfterSeconds`: their status entries and metric series go with them. Called by
    /// the queue's periodic maintenance; returns the origins forgotten.
    @discardableResult
    package func forgetIdle() -> [Origin] {
        let cutoff = now() - forgetAfterMillis
        func idle(_ entry: Entry) -> Bool { !entry.pinned && !entry.probing && entry.lastSeen <= cutoff }
        let candidates = state.withLock { map in map.filter { idle($0.value) }.map(\.key) }
        guard !candidates.isEmpty else { return [] }
        // Asked without the lock (the queue takes its index's); looked at again under it, since
        // a failure or new work may have touched the origin meanwhile.
        let unused = candidates.filter { !storedWork(for: $0) }
        return state.withLock { map in
            unused.filter { origin in
                guard let entry = map[origin], idle(entry) else { return false }
                if !entry.online { offlineCount.subtract(1, ordering: .releasing) }
                map.removeValue(forKey: origin)
                return true
            }
        }
    }

    private func probeUntilOnline(_ origin: Origin) async {
        while true {
            await sleep(interval)
            // Direct traffic may have proven it online meanwhile.
            if state.withLock({ $0[origin]?.online ?? true }) {
                endProbing(origin)
                return
            }
            // Nothing stored any more (delivered, deleted, expired): nothing needs the origin
            // now, and a request will try it itself.
            if !storedWork(for: origin) {
                endProbing(origin)
                return
            }
            // A probe Outbox could not start (`notProbed`) leaves it offline until one can.
            if await probe(origin) == .answered {
                endProbing(origin)
                markOnline(origin)
                return
            }
            state.withLock { $0[origin]?.nextProbeAt = now() + Int64(interval * 1000) }
        }
    }
}

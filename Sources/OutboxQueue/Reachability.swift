import OutboxModel
import OutboxTelemetry
import Synchronization

/// Which origins are reachable, and the probes that bring an offline one back.
///
/// An origin goes offline when connecting fails, when the connection drops before a complete
/// response head, when no head arrives in time, or when it answers with an
/// `unavailableStatuses` status. While offline it is probed every `probeIntervalSeconds` (a
/// TCP connect, or `GET probePath` expecting a status below 500); the first success marks it
/// online and calls `onOnline`, which starts its replay. A probe Outbox could not start (no
/// descriptor for its socket: ``ProbeOutcome/notProbed(_:)``) changes nothing: it is tried
/// again at the next interval, and never marks an origin offline. Reads are a lock and a
/// dictionary lookup: cheap enough for every forwarded request.
public final class Reachability: Sendable {
    private struct Entry {
        var online = true
        var lastError: String?
        var nextProbeAt: Int64?
        var probing = false
    }

    private let state = Mutex<[Origin: Entry]>([:])
    /// How many entries are offline, changed under `state`'s lock: while it is zero, the two
    /// calls every forwarded request makes (`isOnline`, `markOnline`) need no lock and no lookup.
    private let offlineCount = Atomic<Int>(0)
    private let interval: Double
    private let probe: @Sendable (Origin) async -> ProbeOutcome
    private let onOnline = Mutex<(@Sendable (Origin) -> Void)?>(nil)
    private let sleep: @Sendable (Double) async -> Void
    private let now: @Sendable () -> Int64
    /// Where an origin going off- or online is announced (`event: origin`).
    private let events: EventHub?

    /// - Parameters:
    ///   - probe: whether the origin answers (see `TCPProbe` and the GET probe).
    ///   - sleep, now: injectable so tests need not wait for real intervals.
    package init(probeIntervalSeconds: Double,
                probe: @escaping @Sendable (Origin) async -> ProbeOutcome,
                sleep: @escaping @Sendable (Double) async -> Void = Reachability.sleep(seconds:),
                now: @escaping @Sendable () -> Int64 = { WallClock.millis() }, events: EventHub? = nil) {
        self.events = events
        // A zero interval would make the prober spin against a dead origin.
        interval = max(0.05, probeIntervalSeconds)
        self.probe = probe
        self.sleep = sleep
        self.now = now
    }

    /// A probe that only says yes or no (true: the origin answers); it is always able to probe.
    package convenience init(probeIntervalSeconds: Double, probe: @escaping @Sendable (Origin) async -> Bool,
                             sleep: @escaping @Sendable (Double) async -> Void = Reachability.sleep(seconds:),
                             now: @escaping @Sendable () -> Int64 = { WallClock.millis() }, events: EventHub? = nil) {
        self.init(probeIntervalSeconds: probeIntervalSeconds, probe: { ProbeOutcome(answered: await probe($0)) },
                  sleep: sleep, now: now, events: events)
    }

    /// The real wait between probes. Cancelled, the sleep only ends early: the next probe comes sooner.
    package static func sleep(seconds: Double) async {
        try? await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1e9))
    }

    /// Called (on a probe task) each time an offline origin comes back.
    public func setOnOnline(_ handler: @escaping @Sendable (Origin) -> Void) {
        onOnline.withLock { $0 = handler }
    }

    public func isOnline(_ origin: Origin) -> Bool {
        if offlineCount.load(ordering: .acquiring) == 0 { return true }
        return state.withLock { $0[origin]?.online ?? true }
    }

    /// Records a failure that means "unreachable" and starts probing if it was online.
    /// Returns whether the origin was online until now (the moment worth a log line).
    @discardableResult
    public func markOffline(_ origin: Origin, reason: String) -> Bool {
        let (startProbe, wasOnline) = state.withLock { map -> (Bool, Bool) in
            var entry = map[origin] ?? Entry()
            let wasOnline = entry.online
            if wasOnline { offlineCount.add(1, ordering: .releasing) }
            entry.online = false
            entry.lastError = reason
            let start = !entry.probing
            if start {
                entry.probing = true
                entry.nextProbeAt = now() + Int64(interval * 1000)
            }
            map[origin] = entry
            return (start, wasOnline)
        }
        if startProbe {
            Task { await self.probeUntilOnline(origin) }
        }
        if wasOnline { announce(origin, online: false, lastError: reason) }
        return wasOnline
    }

    /// Records that the origin answered (a forwarded request or a replay got a response).
    public func markOnline(_ origin: Origin) {
        guard offlineCount.load(ordering: .acquiring) > 0 else { return }
        let cameBack = state.withLock { map -> Bool in
            guard var entry = map[origin], !entry.online else { return false }
            offlineCount.subtract(1, ordering: .releasing)
            entry.online = true
            entry.nextProbeAt = nil
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
                                   nextProbeAt: $0.value.online ? nil : $0.value.nextProbeAt) }
                .sorted { $0.origin.description < $1.origin.description }
        }
    }

    /// Makes an origin known (online) so that `/admin/status` lists it before any failure.
    public func register(_ origin: Origin) {
        state.withLock { map in
            if map[origin] == nil { map[origin] = Entry() }
        }
    }

    private func probeUntilOnline(_ origin: Origin) async {
        while true {
            await sleep(interval)
            // Direct traffic may have proven it online meanwhile.
            if isOnline(origin) {
                state.withLock { $0[origin]?.probing = false }
                return
            }
            // A probe Outbox could not start (`notProbed`) leaves it offline until one can.
            if await probe(origin) == .answered {
                state.withLock { $0[origin]?.probing = false }
                markOnline(origin)
                return
            }
            state.withLock { $0[origin]?.nextProbeAt = now() + Int64(interval * 1000) }
        }
    }
}

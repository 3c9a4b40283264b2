@testable import OutboxModel
@testable import OutboxQueue
import Synchronization
import Testing

@Suite("Reachability: online until a failure, per origin, back on an answer")
struct ReachabilityTests {
    private let api = Origin(scheme: .http, host: "api.local", port: 80)
    private let other = Origin(scheme: .https, host: "other.local", port: 443)

    /// Probes never succeed and wait an hour between tries, so only the calls under test
    /// change an origin's state.
    private func makeReachability() -> Reachability {
        Reachability(probeIntervalSeconds: 1, probe: { _ in false },
                     sleep: { _ in try? await Task.sleep(nanoseconds: 3_600_000_000_000) })
    }

    @Test("an origin is online until marked offline, alone, and back online with one onOnline call")
    func offlineAndBack() {
        let reachability = makeReachability()
        let cameBack = Mutex<[Origin]>([])
        reachability.setOnOnline { origin in cameBack.withLock { $0.append(origin) } }
        #expect(reachability.isOnline(api))
        // Answers from an origin that never failed change nothing and call nobody.
        reachability.markOnline(api)
        #expect(cameBack.withLock { $0 }.isEmpty)

        #expect(reachability.markOffline(api, reason: "connect failed: refused"))
        #expect(!reachability.isOnline(api))
        #expect(reachability.isOnline(other))
        // A second failure: it was offline already.
        #expect(!reachability.markOffline(api, reason: "connect failed: refused"))
        #expect(!reachability.isOnline(api))

        reachability.markOnline(other)
        #expect(!reachability.isOnline(api))
        reachability.markOnline(api)
        #expect(reachability.isOnline(api))
        #expect(cameBack.withLock { $0 } == [api])
        reachability.markOnline(api)
        #expect(cameBack.withLock { $0 } == [api])
    }

    @Test("two origins offline: one coming back leaves the other offline")
    func twoOffline() {
        let reachability = makeReachability()
        reachability.markOffline(api, reason: "HTTP 503")
        reachability.markOffline(other, reason: "tls: handshake timeout")
        reachability.markOnline(api)
        #expect(reachability.isOnline(api))
        #expect(!reachability.isOnline(other))
        reachability.markOnline(other)
        #expect(reachability.isOnline(other))
        reachability.markOffline(other, reason: "HTTP 503")
        #expect(!reachability.isOnline(other))
        #expect(reachability.isOnline(api))
    }

    // MARK: Origins with nothing stored

    /// Probes that fail, counted per origin, with a pause between rounds short enough that a
    /// probe loop runs many rounds while a test waits.
    private final class CountingProbes: Sendable {
        let counts = Mutex<[Origin: Int]>([:])
        let answers = Mutex<Bool>(false)
        func count(_ origin: Origin) -> Int { counts.withLock { $0[origin] ?? 0 } }

        func makeReachability(forgetAfterSeconds: Double = 300,
                              now: @escaping @Sendable () -> Int64 = { WallClock.millis() }) -> Reachability {
            Reachability(probeIntervalSeconds: 0.05, forgetAfterSeconds: forgetAfterSeconds, probe: { origin in
                self.counts.withLock { $0[origin, default: 0] += 1 }
                return self.answers.withLock { $0 }
            }, sleep: { _ in try? await Task.sleep(nanoseconds: 1_000_000) }, now: now)
        }

        /// Waits (bounded) until `origin` was probed `atLeast` times.
        func waitForProbes(of origin: Origin, atLeast: Int) async -> Int {
            for _ in 0..<5000 where count(origin) < atLeast {
                try? await Task.sleep(nanoseconds: 1_000_000)
            }
            return count(origin)
        }
    }

    @Test("an origin that failed with nothing stored is not probed and still takes requests")
    func nothingStoredNothingProbed() async {
        let probes = CountingProbes()
        let reachability = probes.makeReachability()
        let stored = Mutex<Set<Origin>>([other])
        reachability.setHasStoredWork { origin in stored.withLock { $0.contains(origin) } }
        #expect(reachability.markOffline(api, reason: "connect failed: refused"))
        #expect(reachability.isOnline(api), "nothing stored: the next request tries it")
        let entry = reachability.statuses.first { $0.origin == api }
        #expect(entry?.online == false && entry?.lastError == "connect failed: refused" && entry?.nextProbeAt == nil)
        // An origin with stored work, failing alongside, is probed: by the time it was probed a
        // few times, a probe loop for the other origin would have run as often.
        reachability.markOffline(other, reason: "connect failed: refused")
        #expect(!reachability.isOnline(other))
        #expect(await probes.waitForProbes(of: other, atLeast: 5) >= 5)
        #expect(probes.count(api) == 0)
    }

    @Test("work stored for an offline origin starts its probes; they stop once nothing is stored")
    func storedWorkStartsAndEndsProbing() async {
        let probes = CountingProbes()
        let reachability = probes.makeReachability()
        let stored = Mutex<Set<Origin>>([])
        reachability.setHasStoredWork { origin in stored.withLock { $0.contains(origin) } }
        reachability.markOffline(api, reason: "HTTP 503")
        #expect(reachability.isOnline(api))
        stored.withLock { _ = $0.insert(api) }
        reachability.workStored(for: api)
        #expect(!reachability.isOnline(api), "new writes queue behind the stored one")
        #expect(await probes.waitForProbes(of: api, atLeast: 3) >= 3)
        // The work went (delivered elsewhere, deleted): the probes end, and requests try again.
        stored.withLock { $0 = [other] }
        for _ in 0..<5000 where reachability.statuses.first(where: { $0.origin == api })?.nextProbeAt != nil {
            try? await Task.sleep(nanoseconds: 1_000_000)
        }
        #expect(reachability.statuses.first { $0.origin == api }?.nextProbeAt == nil)
        #expect(reachability.isOnline(api))
        // While another origin is probed five times, this one is not probed again.
        let settled = probes.count(api)
        reachability.markOffline(other, reason: "HTTP 503")
        #expect(await probes.waitForProbes(of: other, atLeast: 5) >= 5)
        #expect(probes.count(api) == settled)
    }

    @Test("idle origins with nothing stored are forgotten; pinned ones and those with work are kept")
    func forgettingIdleOrigins() {
        let clock = Mutex<Int64>(1_000_000)
        let reachability = Reachability(probeIntervalSeconds: 1, forgetAfterSeconds: 10, probe: { _ in false },
                                        sleep: { _ in try? await Task.sleep(nanoseconds: 3_600_000_000_000) },
                                        now: { clock.withLock { $0 } })
        let pinned = Origin(scheme: .http, host: "upstream.local", port: 9000)
        let busy = Origin(scheme: .http, host: "busy.local", port: 80)
        reachability.setHasStoredWork { $0 == busy }
        reachability.register(pinned, pinned: true)
        reachability.markOffline(api, reason: "refused")
        reachability.markOffline(other, reason: "refused")
        reachability.markOffline(busy, reason: "refused")
        clock.withLock { $0 += 9_000 }
        #expect(reachability.forgetIdle().isEmpty)
        // A failure refreshes an origin: it is kept forgetAfterSeconds from then.
        reachability.markOffline(other, reason: "refused again")
        clock.withLock { $0 += 1_000 }
        #expect(reachability.forgetIdle() == [api])
        #expect(Set(reachability.statuses.map(\.origin)) == [pinned, other, busy])
        #expect(reachability.markOffline(api, reason: "refused"), "a forgotten origin starts afresh")
        clock.withLock { $0 += 20_000 }
        #expect(Set(reachability.forgetIdle()) == [api, other])
        #expect(Set(reachability.statuses.map(\.origin)) == [pinned, busy])
        #expect(reachability.isOnline(api))
    }
}

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
}

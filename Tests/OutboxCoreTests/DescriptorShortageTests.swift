import Glibc
@testable import OutboxModel
@testable import OutboxNet
@testable import OutboxProxy
@testable import OutboxQueue
import Synchronization
import Testing

/// Outbox's own lack of descriptors is its own problem (SPEC §6): told apart from an
/// unreachable origin where a connect fails, answered `503 local_resources_exhausted`, and
/// never a reason to mark an origin offline.
@Suite("Descriptor shortage is local, never an unreachable origin")
struct DescriptorShortageTests {
    private let origin = Origin(scheme: .http, host: "api.local", port: 80)

    @Test(arguments: [EMFILE, ENFILE, ENOBUFS, ENOMEM])
    func aConnectThatFindsNoDescriptor_IsALocalError_NeverUnreachable(code: Int32) {
        let error = UpstreamError.connecting(SystemError("socket", code: code))
        #expect(error == .localResourcesExhausted("socket: \(String(cString: strerror(code)))"))
        #expect(!error.meansUnreachable)
        #expect(error.neverSent)
    }

    @Test(arguments: [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, ETIMEDOUT, EADDRNOTAVAIL])
    func aConnectThePeerRefused_IsAConnectFailure(code: Int32) {
        let error = UpstreamError.connecting(SystemError("connect", code: code))
        #expect(error == .connectFailed("connect: \(String(cString: strerror(code)))"))
        #expect(error.meansUnreachable)
    }

    @Test func theSoftLimitIsRaisedToTheHardOne_CappedAtTheKernelsCeiling_NeverLowered() {
        let ceiling: UInt64 = 1 << 20
        #expect(OpenFileLimit(soft: 64, hard: 4096).raisedSoft(ceiling: ceiling) == 4096)
        #expect(OpenFileLimit(soft: 1024, hard: 524_288).raisedSoft(ceiling: ceiling) == 524_288)
        #expect(OpenFileLimit(soft: 1024, hard: OpenFileLimit.unlimited).raisedSoft(ceiling: ceiling) == ceiling)
        #expect(OpenFileLimit(soft: 4096, hard: 4096).raisedSoft(ceiling: ceiling) == 4096)
        #expect(OpenFileLimit(soft: 2048, hard: 2_000_000).raisedSoft(ceiling: 1_000) == 2048)
        #expect(OpenFileLimit(soft: 1, hard: OpenFileLimit.unlimited).hardText == "unlimited")
    }

    @Test func aReserveLetGo_RefusesSocketsUntilItIsTakenBack() {
        // A reserve of its own: the process's one belongs to whatever else runs in this process.
        let reserve = DescriptorReserve()
        reserve.fill()
        #expect(!reserve.isShort)
        #expect(reserve.retake(), "a reserve that was never let go needs no taking back")
        reserve.release()
        #expect(reserve.isShort)
        // This process has descriptors to spare: the reserve comes back at the first try.
        #expect(reserve.retake())
        #expect(!reserve.isShort)
        // A socket that left descriptors to spare keeps the reserve (the real binary's last one
        // is `DescriptorExhaustionTests`').
        reserve.tookOne()
        #expect(!reserve.isShort)
    }

    @Test func theAnswerIs503LocalResourcesExhausted_WithARetryAfterOfOneSecond() {
        let error = ProxyError.upstream(.localResourcesExhausted("socket: Too many open files"))
        let text = String(decoding: ErrorResponse.bytes(for: error, close: false, retryAfterSeconds: 7), as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
        #expect(text.contains("Retry-After: 1\r\n"), "the probe interval is for unreachable origins: \(text)")
        #expect(text.contains(#"{"error":{"code":"local_resources_exhausted","message":"#), "\(text)")
        #expect(text.contains("Too many open files"))
        // An unreachable origin keeps its code and the caller's Retry-After.
        let unreachable = ErrorResponse.bytes(for: .upstream(.connectFailed("refused")), close: false, retryAfterSeconds: 7)
        #expect(String(decoding: unreachable, as: UTF8.self).contains("Retry-After: 7\r\n"))
    }

    @Test func aStartupProbeWithoutASocket_MarksNothingOffline_AndIsTriedAgainUntilItCanBe() async {
        let outcomes = Mutex<[ProbeOutcome]>([.notProbed("socket: Too many open files"), .notProbed("socket: Too many open files"),
                                              .answered])
        let probes = Atomic<Int>(0)
        let reachability = Reachability(probeIntervalSeconds: 1, probe: { _ in
            probes.add(1, ordering: .relaxed)
            return outcomes.withLock { $0.removeFirst() }
        }, sleep: { _ in })
        #expect(await reachability.probeOnce(origin, failure: "unreachable at startup"))
        #expect(probes.load(ordering: .relaxed) == 3)
        #expect(reachability.isOnline(origin))
        #expect(reachability.statuses.allSatisfy { $0.lastError == nil })
    }

    @Test func aStartupProbeTheOriginDidNotAnswer_StillMarksItOffline() async {
        let reachability = Reachability(probeIntervalSeconds: 1, probe: { _ in ProbeOutcome.unanswered },
                                        sleep: { _ in try? await Task.sleep(nanoseconds: 3_600_000_000_000) })
        #expect(!(await reachability.probeOnce(origin, failure: "unreachable at startup")))
        #expect(!reachability.isOnline(origin))
    }

    @Test func probesOfAnOfflineOriginThatGetNoSocket_NeitherBringItBackNorChangeItsError() async {
        let box = Mutex<Reachability?>(nil)
        let seen = Mutex<[String]>([])
        let probes = Atomic<Int>(0)
        let origin = self.origin
        let reachability = Reachability(probeIntervalSeconds: 1, probe: { probed in
            guard probes.add(1, ordering: .relaxed).newValue > 3 else {
                if let reachability = box.withLock({ $0 }) {
                    let status = reachability.statuses.first { $0.origin == probed }
                    seen.withLock { $0.append("\(reachability.isOnline(probed)) \(status?.lastError ?? "-")") }
                }
                return .notProbed("socket: Too many open files")
            }
            return .answered
        }, sleep: { _ in await Task.yield() })
        box.withLock { $0 = reachability }
        let (cameBack, continuation) = AsyncStream<Void>.makeStream()
        reachability.setOnOnline { _ in continuation.yield() }
        reachability.markOffline(origin, reason: "connect failed: connect: Connection refused")
        var iterator = cameBack.makeAsyncIterator()
        _ = await iterator.next()
        // Three probes without a socket were no answer either way; the fourth was an answer.
        #expect(seen.withLock { $0 } == Array(repeating: "false connect failed: connect: Connection refused", count: 3))
        #expect(probes.load(ordering: .relaxed) == 4)
        #expect(reachability.isOnline(origin))
    }
}

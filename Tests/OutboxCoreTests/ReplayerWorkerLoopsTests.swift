import Dispatch
import Foundation
@testable import OutboxConfig
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxNet
@testable import OutboxQueue
@testable import OutboxReplay
@testable import OutboxTelemetry
import Synchronization
import Testing

/// The replayer's workers spread over several event loops, each exchange on its worker's loop;
/// the lanes still go one operation at a time and in order, whichever loop carries them.
@Suite("Replayer: workers on several loops", .timeLimit(.minutes(2)))
struct ReplayerWorkerLoopsTests {
    /// Notes, for every send, its lane, the loop it runs on and whether another of its lane was
    /// still unanswered; answers each on a later turn, so the other lanes run meanwhile.
    final class LoopNotingTransport: ReplayTransport, Sendable {
        struct Seen: Sendable {
            var sent: [String] = []
            var inFlight: [UInt8: Int] = [:]
            var overlapping: [String] = []
            var loops: Set<Int> = []
            var offLoop = 0
        }

        let loops: [EventLoop]
        let seen = Mutex(Seen())

        init(loops: [EventLoop]) {
            self.loops = loops
        }

        func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8],
                  maxResponseBytes: Int) async -> Result<CollectedResponse, UpstreamError> {
            let text = String(decoding: body, as: UTF8.self)
            let lane = body.first ?? 0
            let loop = loops.firstIndex { $0.isCurrent }
            seen.withLock { seen in
                seen.sent.append(text)
                seen.inFlight[lane, default: 0] += 1
                if seen.inFlight[lane, default: 0] > 1 { seen.overlapping.append(text) }
                if let loop { seen.loops.insert(loop) } else { seen.offLoop += 1 }
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async { continuation.resume() }
            }
            seen.withLock { $0.inFlight[lane, default: 1] -= 1 }
            return .success(CollectedResponse(head: HTTPResponseHead(status: 201), body: [], truncated: false))
        }
    }

    @Test func lanesInFlightSpreadOverTwoLoops_EachLaneStillOneAtATimeAndInOrder() async throws {
        let loops = try (0..<2).map { try EventLoop(index: $0, sweepInterval: 1) }
        loops.forEach { $0.start() }
        defer {
            for loop in loops {
                loop.stop()
                loop.join()
            }
        }
        let executors = loops.map { LoopTaskExecutor(loop: $0) }
        let lanes = ["a", "b", "c", "d"]
        let perLane = 25
        let bodies = (0..<perLane).flatMap { n in lanes.map { "\($0)\(n)" } }
        let clock = ManualReplayClock()
        let source = ReplayerLaneTests.LaneSource(bodies.enumerated().map {
            ReplayerTests.request($1, createdAt: clock.nowMilliseconds + Int64($0))
        })
        let transport = LoopNotingTransport(loops: loops)
        let replayer = Replayer(source: source, client: transport,
                                reachability: Reachability(probeIntervalSeconds: 1, probe: { _ in true }),
                                policy: RetryPolicy(OutboxConfig.Retry()), unavailableStatuses: [], ttlSeconds: 3600,
                                logger: Logger(level: .error, sink: { _ in }), clock: clock, maxConcurrentPerOrigin: 4,
                                executor: executors[0], workerExecutors: executors)

        await replayer.kick(ReplayerTests.origin)
        await source.waiters.waitUntil { source.allCompleted }

        let seen = transport.seen.withLock { $0 }
        #expect(seen.overlapping.isEmpty, "sent while another of its lane was in flight: \(seen.overlapping)")
        for lane in lanes {
            let order = seen.sent.filter { $0.hasPrefix(lane) }
            #expect(order == (0..<perLane).map { "\(lane)\($0)" }, "lane \(lane) out of order: \(order)")
        }
        #expect(seen.loops == [0, 1], "the workers did not spread over both loops: \(seen.loops)")
        #expect(seen.offLoop == 0, "\(seen.offLoop) sends ran off the loops")
    }
}

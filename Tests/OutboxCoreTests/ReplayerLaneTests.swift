import Foundation
@testable import OutboxConfig
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxReplay
@testable import OutboxTelemetry
import Synchronization
import Testing

/// The replayer's bound on one origin's concurrent attempts, driven by a source that names
/// lanes and a transport that holds every send until the test lets it answer.
@Suite("Replayer: concurrent lanes", .timeLimit(.minutes(2)))
struct ReplayerLaneTests {
    /// Operations in creation order, each in a lane (its body's first letter): the next work
    /// is the oldest pending operation whose lane has nothing in progress.
    final class LaneSource: ReplaySource, Sendable {
        let operations: Mutex<[(request: OperationRequest, state: OperationState)]>

        let waiters = ConditionWaiters()

        init(_ requests: [OperationRequest]) {
            operations = Mutex(requests.map { ($0, OperationState()) })
        }

        static func lane(_ request: OperationRequest) -> UInt8 { request.body.first ?? 0 }

        func takeWork(for origin: Origin, now: Int64) -> ReplayWork {
            operations.withLock { list in
                let busy = Set(list.filter { $0.state.status == .inProgress }.map { Self.lane($0.request) })
                guard let index = list.firstIndex(where: { $0.state.status == .pending && !busy.contains(Self.lane($0.request)) })
                else { return .idle }
                let attempt = ReplayAttempt(taking: list[index].request, in: list[index].state, now: now)
                list[index].state = attempt.inProgress
                return .attempt(attempt)
            }
        }

        func record(_ id: UUID, _ state: OperationState) async { recordSoon(id, state) }

        /// Written at once: this test is about lanes in flight, not the disk.
        func recordSoon(_ id: UUID, _ state: OperationState, written: @escaping @Sendable () -> Void) {
            operations.withLock { list in
                if let index = list.firstIndex(where: { $0.request.id == id }) { list[index].state = state }
            }
            written()
            waiters.changed()
        }

        var originsWithWork: [Origin] { [ReplayerTests.origin] }
        var forcedOffline: Bool { false }

        var allCompleted: Bool { operations.withLock { $0.allSatisfy { $0.state.status == .completed } } }
    }

    /// Reports each send (its body and how many sends were then unanswered) and holds it until
    /// `answer` is called for that body.
    final class HeldTransport: ReplayTransport, Sendable {
        struct Sent: Sendable {
            var body: String
            var inFlight: [String]
        }

        let events: AsyncStream<Sent>
        private let continuation: AsyncStream<Sent>.Continuation
        private let held = Mutex<[String: CheckedContinuation<Void, Never>]>([:])
        private let answered = Mutex<Set<String>>([])

        init() {
            (events, continuation) = AsyncStream.makeStream(of: Sent.self)
        }

        func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8],
                  maxResponseBytes: Int) async -> Result<CollectedResponse, UpstreamError> {
            let text = String(decoding: body, as: UTF8.self)
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let early = answered.withLock { $0.contains(text) }
                let inFlight = held.withLock { held -> [String] in
                    if !early { held[text] = waiter }
                    return held.keys.sorted()
                }
                continuation.yield(Sent(body: text, inFlight: early ? inFlight + [text] : inFlight))
                if early { waiter.resume() }
            }
            return .success(CollectedResponse(head: HTTPResponseHead(status: 201), body: [], truncated: false))
        }

        /// Ends the stream of sends.
        func finish() {
            continuation.finish()
        }

        /// A bound on a whole exchange: a replayer that stops sending ends the stream after
        /// 30 s, and the test's checks fail instead of it hanging. Cancel it when done.
        func endsAfterThirtySeconds() -> Task<Void, any Error> {
            Task {
                try await Task.sleep(for: .seconds(30))
                finish()
            }
        }

        func answer(_ body: String) {
            answered.withLock { _ = $0.insert(body) }
            held.withLock { $0.removeValue(forKey: body) }?.resume()
        }
    }

    /// A replayer of `source` through `transport` on `clock`, with two lanes at a time.
    static func twoSlotReplayer(_ source: ReplaySource, _ transport: HeldTransport, _ clock: ManualReplayClock) -> Replayer {
        Replayer(source: source, client: transport,
                 reachability: Reachability(probeIntervalSeconds: 1, probe: { _ in true }),
                 policy: RetryPolicy(OutboxConfig.Retry()), unavailableStatuses: [], ttlSeconds: 3600,
                 logger: Logger(level: .error, sink: { _ in }), clock: clock, maxConcurrentPerOrigin: 2)
    }

    @Test func lanesOfOneOriginRunSideBySideUpToTheBound_EachLaneOneAtATimeInOrder() async throws {
        let bodies = ["a0", "b0", "c0", "a1", "b1", "c1", "a2"]
        let clock = ManualReplayClock()
        let source = LaneSource(bodies.enumerated().map {
            ReplayerTests.request($1, createdAt: clock.nowMilliseconds + Int64($0))
        })
        let transport = HeldTransport()
        let replayer = Self.twoSlotReplayer(source, transport, clock)
        let watchdog = transport.endsAfterThirtySeconds()
        defer { watchdog.cancel() }
        await replayer.kick(ReplayerTests.origin)
        var sent: [String] = []
        var mostAtOnce = 0
        var events = transport.events.makeAsyncIterator()
        while sent.count < bodies.count, let event = await events.next() {
            sent.append(event.body)
            mostAtOnce = max(mostAtOnce, event.inFlight.count)
            #expect(event.inFlight.count <= 2, "\(event.inFlight) in flight at once")
            #expect(Set(event.inFlight.map(\.first)).count == event.inFlight.count, "two of one lane in flight: \(event.inFlight)")
            if sent.count == bodies.count {
                event.inFlight.forEach(transport.answer)
            } else if event.inFlight.count == 2,
                      let oldest = event.inFlight.min(by: { (sent.firstIndex(of: $0) ?? 0) < (sent.firstIndex(of: $1) ?? 0) }) {
                // Both slots are taken: answering the longer-running one frees a slot, and the
                // sequence of sends is then fixed by the source's order.
                transport.answer(oldest)
            }
        }
        #expect(sent.count == bodies.count, "sent \(sent)")
        #expect(mostAtOnce == 2)
        for lane in ["a", "b", "c"] {
            #expect(sent.filter { $0.hasPrefix(lane) } == bodies.filter { $0.hasPrefix(lane) }, "lane \(lane): \(sent)")
        }
        await source.waiters.waitUntil { source.allCompleted }
        #expect(source.allCompleted)
    }
}

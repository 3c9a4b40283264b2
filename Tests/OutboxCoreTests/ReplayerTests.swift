import Foundation
@testable import OutboxConfig
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxReplay
@testable import OutboxTelemetry
import Synchronization
import Testing

/// The replayer driven by a scripted transport and a manual clock: backoff is stepped
/// through, never slept through.
@Suite("Replayer lanes", .timeLimit(.minutes(2)))
struct ReplayerTests {
    static let origin = Origin(scheme: .http, host: "127.0.0.1", port: 9)

    /// One origin's operations in memory, in creation order: the queue's rules reduced to
    /// "first unfinished one, when due".
    final class ScriptedSource: ReplaySource, Sendable {
        struct Stored {
            var request: OperationRequest
            var state = OperationState()
        }
        let operations: Mutex<[Stored]>
        let recorded = Mutex<[(UUID, OperationState)]>([])
        /// With `holdsWrites`, the write confirmations of `recordSoon` wait here, oldest first,
        /// until the test gives them: a log whose syncs lag behind the lane.
        let heldWrites = Mutex<[(state: OperationState, written: @Sendable () -> Void)]>([])
        let holdsWrites: Bool
        let waiters = ConditionWaiters()

        init(_ requests: [OperationRequest], holdsWrites: Bool = false) {
            operations = Mutex(requests.map { Stored(request: $0) })
            self.holdsWrites = holdsWrites
        }

        func takeWork(for origin: Origin, now: Int64) -> ReplayWork {
            let attempt = operations.withLock { list -> ReplayWork in
                guard let index = list.firstIndex(where: { !$0.state.status.isFinished }) else { return .idle }
                let next = list[index]
                if next.state.status == .inProgress { return .idle }
                if let due = next.state.nextAttemptAt, due > now { return .wait(until: due) }
                let attempt = ReplayAttempt(taking: next.request, in: next.state, now: now)
                list[index].state = attempt.inProgress
                return .attempt(attempt)
            }
            waiters.changed()
            return attempt
        }

        func record(_ id: UUID, _ state: OperationState) async { recordSoon(id, state, written: {}) }

        func recordSoon(_ id: UUID, _ state: OperationState, written: @escaping @Sendable () -> Void) {
            operations.withLock { list in
                if let index = list.firstIndex(where: { $0.request.id == id }) { list[index].state = state }
            }
            recorded.withLock { $0.append((id, state)) }
            if holdsWrites { heldWrites.withLock { $0.append((state, written)) } } else { written() }
            waiters.changed()
        }

        var originsWithWork: [Origin] { [ReplayerTests.origin] }
        var forcedOffline: Bool { false }

        func state(_ id: UUID) -> OperationState? {
            operations.withLock { $0.first { $0.request.id == id }?.state }
        }
    }

    /// Answers each attempt with the next scripted status and remembers what it was sent.
    final class ScriptedTransport: ReplayTransport, Sendable {
        let script: Mutex<[Int]>
        let sent = Mutex<[HTTPRequestHead]>([])

        init(_ statuses: [Int]) { script = Mutex(statuses) }

        func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8],
                  maxResponseBytes: Int) async -> Result<CollectedResponse, UpstreamError> {
            sent.withLock { $0.append(head) }
            let status = script.withLock { $0.isEmpty ? 200 : $0.removeFirst() }
            return .success(CollectedResponse(head: HTTPResponseHead(status: status), body: Array("s\(status)".utf8), truncated: false))
        }
    }

    static func request(_ body: String, createdAt: Int64) -> OperationRequest {
        var headers = HTTPHeaders()
        headers.add("Host", "127.0.0.1:9")
        headers.add("Idempotency-Key", "key-\(body)")
        return OperationRequest(id: UUID(), origin: origin, method: "POST", target: "/items", headers: headers,
                                body: Array(body.utf8), idempotencyKey: "key-\(body)", fingerprint: [],
                                priority: .normal, tag: nil, dependsOn: nil, createdAt: createdAt)
    }

    static func replayer(source: ScriptedSource, transport: ReplayTransport, clock: ManualReplayClock,
                         retry: OutboxConfig.Retry) -> Replayer {
        Replayer(source: source, client: transport,
                 reachability: Reachability(probeIntervalSeconds: 1, probe: { _ in true }),
                 policy: RetryPolicy(retry), unavailableStatuses: [], ttlSeconds: 3600,
                 logger: Logger(level: .error, sink: { _ in }), clock: clock)
    }

    @Test func twoRetryableFailuresThenSuccess_CompletesAtTheThirdAttempt_WithBackoffBetween() async throws {
        let clock = ManualReplayClock()
        let start = clock.nowMilliseconds
        let operation = Self.request("a", createdAt: start)
        let source = ScriptedSource([operation])
        let transport = ScriptedTransport([503, 503, 201])
        var retry = OutboxConfig.Retry()
        retry.jitter = false  // default policy: 1 s, then 2 s
        let replayer = Self.replayer(source: source, transport: transport, clock: clock, retry: retry)

        await replayer.kick(Self.origin)
        await clock.waitForSleepers(1)
        #expect(clock.sleepingDeadlines == [start + 1000], "first retry after baseDelaySeconds")
        #expect(transport.sent.withLock { $0.count } == 1)

        clock.advance(by: 1000)
        await clock.waitForSleepers(1)
        #expect(clock.sleepingDeadlines == [start + 1000 + 2000], "second retry after base × multiplier")
        #expect(transport.sent.withLock { $0.count } == 2)

        clock.advance(by: 2000)
        await source.waiters.waitUntil { source.state(operation.id)?.status == .completed }
        let final = try #require(source.state(operation.id))
        #expect(final.status == .completed)
        #expect(final.retryCount == 2)
        #expect(final.response?.status == 201)
        #expect(transport.sent.withLock { $0.map { $0.headers.first("Outbox-Attempt") } } == ["1", "2", "3"])
        #expect(transport.sent.withLock { $0.allSatisfy { $0.headers.first("Idempotency-Key") == "key-a" } })
    }

    @Test func permanentFailureEndsTheOperation_AndTheLaneMovesOn() async throws {
        let clock = ManualReplayClock()
        let first = Self.request("bad", createdAt: clock.nowMilliseconds)
        let second = Self.request("good", createdAt: clock.nowMilliseconds + 1)
        let source = ScriptedSource([first, second])
        let transport = ScriptedTransport([400, 201])
        let replayer = Self.replayer(source: source, transport: transport, clock: clock, retry: OutboxConfig.Retry())

        await replayer.kick(Self.origin)
        await source.waiters.waitUntil { source.state(second.id)?.status == .completed }
        #expect(source.state(first.id)?.status == .failed)
        #expect(source.state(first.id)?.retryCount == 0)
        #expect(source.state(second.id)?.status == .completed)
        #expect(clock.sleepingDeadlines.isEmpty, "a permanent failure does not back off")
    }
}

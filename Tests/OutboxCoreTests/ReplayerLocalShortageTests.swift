@testable import OutboxConfig
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxReplay
@testable import OutboxTelemetry
import Synchronization
import Testing

/// A replay attempt that Outbox could not start for lack of a descriptor (SPEC §6): nothing was
/// sent, so it spends no retry, blames no origin, and is tried again a second later.
@Suite("Replayer: an attempt without a socket", .timeLimit(.minutes(2)))
struct ReplayerLocalShortageTests {
    /// Fails the first `shortages` attempts as the pool does when `socket()` finds no
    /// descriptor, then answers 201; remembers the heads it was given.
    final class ShortTransport: ReplayTransport, Sendable {
        let shortages: Mutex<Int>
        let sent = Mutex<[HTTPRequestHead]>([])

        init(shortages: Int) { self.shortages = Mutex(shortages) }

        func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8],
                  maxResponseBytes: Int) async -> Result<CollectedResponse, UpstreamError> {
            sent.withLock { $0.append(head) }
            let short = shortages.withLock { left in
                defer { left = max(0, left - 1) }
                return left > 0
            }
            if short { return .failure(.localResourcesExhausted("socket: Too many open files")) }
            return .success(CollectedResponse(head: HTTPResponseHead(status: 201), body: [], truncated: false))
        }
    }

    @Test func anAttemptWithoutASocket_IsTriedAgainAfterASecond_WithTheSameAttemptNumber_AndTheOriginStaysOnline() async throws {
        let clock = ManualReplayClock()
        let start = clock.nowMilliseconds
        let operation = ReplayerTests.request("a", createdAt: start)
        let source = ReplayerTests.ScriptedSource([operation])
        let transport = ShortTransport(shortages: 2)
        let reachability = Reachability(probeIntervalSeconds: 1, probe: { _ in true })
        var retry = OutboxConfig.Retry()
        retry.maxRetries = 0  // a spent retry would fail the operation at once
        let replayer = Replayer(source: source, client: transport, reachability: reachability, policy: RetryPolicy(retry),
                                unavailableStatuses: [], ttlSeconds: 3600, logger: Logger(level: .error, sink: { _ in }),
                                clock: clock)

        await replayer.kick(ReplayerTests.origin)
        await clock.waitForSleepers(1)
        #expect(clock.sleepingDeadlines == [start + 1000])
        let waiting = try #require(source.state(operation.id))
        #expect(waiting.status == .pending)
        #expect(waiting.retryCount == 0)
        #expect(waiting.lastError == "local resources exhausted: socket: Too many open files")
        #expect(reachability.isOnline(ReplayerTests.origin), "Outbox's own shortage marked the origin offline")

        clock.advance(by: 1000)
        await clock.waitForSleepers(1)
        #expect(clock.sleepingDeadlines == [start + 2000])
        clock.advance(by: 1000)
        await source.waiters.waitUntil { source.state(operation.id)?.status == .completed }
        #expect(source.state(operation.id)?.retryCount == 0)
        #expect(transport.sent.withLock { $0.map { $0.headers.first("Outbox-Attempt") } } == ["1", "1", "1"])
        #expect(reachability.statuses.allSatisfy { $0.online && $0.lastError == nil })
    }
}

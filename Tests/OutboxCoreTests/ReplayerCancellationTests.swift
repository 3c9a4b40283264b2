import Foundation
@testable import OutboxConfig
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxReplay
@testable import OutboxTelemetry
import Synchronization
import Testing

/// Every attempt ends: its deadline (on the manual clock), a removal of its operation and a
/// stop all end it through its one cancellation, and the replayer acts on why.
@Suite("Replayer: attempt deadlines, cancellation and stop", .timeLimit(.minutes(2)))
struct ReplayerCancellationTests {
    /// `ReplayerTests.ScriptedSource`, with removal: what an admin delete does to the replayer
    /// (the operation goes, its attempt in flight is cancelled).
    final class RemovableSource: ReplaySource, Sendable {
        let inner: ReplayerTests.ScriptedSource
        private let cancellations = Mutex<[UUID: CallCancellation]>([:])

        init(_ requests: [OperationRequest]) {
            inner = ReplayerTests.ScriptedSource(requests)
        }

        func takeWork(for origin: Origin, now: Int64) -> ReplayWork {
            let work = inner.takeWork(for: origin, now: now)
            if case .attempt(let attempt) = work { cancellations.withLock { $0[attempt.id] = attempt.cancellation } }
            return work
        }

        func remove(_ id: UUID) {
            inner.operations.withLock { $0.removeAll { $0.request.id == id } }
            cancellations.withLock { $0[id] }?.cancel(.removed)
            inner.waiters.changed()
        }

        func record(_ id: UUID, _ state: OperationState) async { await inner.record(id, state) }
        func recordSoon(_ id: UUID, _ state: OperationState, written: @escaping @Sendable () -> Void) {
            inner.recordSoon(id, state, written: written)
        }
        var originsWithWork: [Origin] { inner.originsWithWork }
        var forcedOffline: Bool { false }

        func recorded(_ id: UUID) -> [OperationState] {
            inner.recorded.withLock { $0.filter { $0.0 == id }.map(\.1) }
        }
    }

    /// Holds every send until the test answers it or its cancellation ends it, as the event
    /// loops' client does; reports each send (its body) and each cancelled one.
    final class CancellableTransport: ReplayTransport, Sendable {
        let sends: AsyncStream<String>
        private let sent: AsyncStream<String>.Continuation
        private let held = Mutex<[String: CheckedContinuation<Result<CollectedResponse, UpstreamError>, Never>]>([:])
        let cancelled = Mutex<[String]>([])
        let attemptHeaders = Mutex<[String]>([])

        init() {
            (sends, sent) = AsyncStream.makeStream(of: String.self)
        }

        func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8],
                  maxResponseBytes: Int) async -> Result<CollectedResponse, UpstreamError> {
            .failure(.connectFailed("the replayer sends with a cancellation"))
        }

        func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8], maxResponseBytes: Int,
                  cancellation: CallCancellation,
                  whileInFlight: @Sendable () -> Void) async -> Result<CollectedResponse, UpstreamError> {
            let text = String(decoding: body, as: UTF8.self)
            attemptHeaders.withLock { $0.append("\(text)#\(head.headers.first("Outbox-Attempt") ?? "-")") }
            whileInFlight()
            return await withCheckedContinuation { continuation in
                held.withLock { $0[text] = continuation }
                sent.yield(text)
                if !cancellation.onCancel({ self.cancel(text) }) { cancel(text) }
            }
        }

        private func cancel(_ text: String) {
            guard let waiter = held.withLock({ $0.removeValue(forKey: text) }) else { return }
            cancelled.withLock { $0.append(text) }
            waiter.resume(returning: .failure(.noResponse("cancelled", retryable: false)))
        }

        func answer(_ body: String, status: Int = 201) {
            held.withLock { $0.removeValue(forKey: body) }?.resume(
                returning: .success(CollectedResponse(head: HTTPResponseHead(status: status), body: [], truncated: false)))
        }

        /// Ends the stream of sends after 30 s: a replayer that stops sending fails the checks
        /// instead of hanging the test. Cancel it when done.
        func endsAfterThirtySeconds() -> Task<Void, any Error> {
            Task {
                try await Task.sleep(for: .seconds(30))
                sent.finish()
            }
        }
    }

    static func replayer(_ source: ReplaySource, _ transport: ReplayTransport, _ clock: ManualReplayClock,
                         attemptTimeoutSeconds: Double = 60, maxRetries: Int = 5) -> Replayer {
        var retry = OutboxConfig.Retry()
        retry.jitter = false
        retry.maxRetries = maxRetries
        return Replayer(source: source, client: transport,
                        reachability: Reachability(probeIntervalSeconds: 1, probe: { _ in true }),
                        policy: RetryPolicy(retry), unavailableStatuses: [], ttlSeconds: 3600,
                        logger: Logger(level: .error, sink: { _ in }), clock: clock,
                        attemptTimeoutSeconds: attemptTimeoutSeconds)
    }

    @Test func anAttemptPastItsDeadlineEndsAsATimeout_IsRetriedAfterBackoff_AndTheLaneGoesOnOnceItFailed() async throws {
        let clock = ManualReplayClock()
        let start = clock.nowMilliseconds
        let slow = ReplayerTests.request("slow", createdAt: start)
        let behind = ReplayerTests.request("behind", createdAt: start + 1)
        let source = RemovableSource([slow, behind])
        let transport = CancellableTransport()
        let replayer = Self.replayer(source, transport, clock, attemptTimeoutSeconds: 2, maxRetries: 1)
        let watchdog = transport.endsAfterThirtySeconds()
        defer { watchdog.cancel() }
        var sends = transport.sends.makeAsyncIterator()

        await replayer.kick(ReplayerTests.origin)
        let sent1 = await sends.next()
        #expect(sent1 == "slow")
        await clock.waitForAttemptDeadlines(1)
        #expect(clock.attemptDeadlines == [start + 2000], "the attempt's deadline is attemptTimeoutSeconds after it was sent")
        clock.advance(by: 2000)
        await source.inner.waiters.waitUntil { source.inner.state(slow.id)?.status == .pending }
        let retried = try #require(source.inner.state(slow.id))
        #expect(retried.lastError == "attempt timed out after 2 s")
        #expect(retried.retryCount == 1)
        #expect(transport.cancelled.withLock { $0 } == ["slow"], "the call was not ended")

        await clock.waitForSleepers(1)
        #expect(clock.sleepingDeadlines == [start + 2000 + 1000], "the retry waits for its backoff")
        #expect(clock.attemptDeadlines.isEmpty, "a deadline timer runs while nothing is sent")
        clock.advance(by: 1000)
        let sent2 = await sends.next()
        #expect(sent2 == "slow")
        await clock.waitForAttemptDeadlines(1)
        clock.advance(by: 2000)
        // Retries exhausted: the lane moves on.
        let sent3 = await sends.next()
        #expect(sent3 == "behind")
        transport.answer("behind")
        await source.inner.waiters.waitUntil { source.inner.state(behind.id)?.status == .completed }
        #expect(source.inner.state(slow.id)?.status == .failed)
        #expect(source.inner.state(slow.id)?.lastError == "attempt timed out after 2 s (retries exhausted)")
        #expect(transport.attemptHeaders.withLock { $0 } == ["slow#1", "slow#2", "behind#1"])
    }

    @Test func removingAnOperationCancelsItsAttemptAtOnce_RecordsNothing_AndTheLaneGoesOn() async throws {
        let clock = ManualReplayClock()
        let removed = ReplayerTests.request("removed", createdAt: clock.nowMilliseconds)
        let next = ReplayerTests.request("next", createdAt: clock.nowMilliseconds + 1)
        let source = RemovableSource([removed, next])
        let transport = CancellableTransport()
        let replayer = Self.replayer(source, transport, clock)
        let watchdog = transport.endsAfterThirtySeconds()
        defer { watchdog.cancel() }
        var sends = transport.sends.makeAsyncIterator()

        await replayer.kick(ReplayerTests.origin)
        let sent4 = await sends.next()
        #expect(sent4 == "removed")
        source.remove(removed.id)
        // No clock step: the removal alone ends the call.
        let sent5 = await sends.next()
        #expect(sent5 == "next")
        #expect(transport.cancelled.withLock { $0 } == ["removed"])
        transport.answer("next")
        await source.inner.waiters.waitUntil { source.inner.state(next.id)?.status == .completed }
        #expect(source.recorded(removed.id).isEmpty, "an outcome was recorded for a removed operation")
        #expect(transport.attemptHeaders.withLock { $0 } == ["removed#1", "next#1"])
    }

    @Test func aStopLetsTheAttemptInFlightFinishAndRecordsIt_AndStartsNoOther() async throws {
        let clock = ManualReplayClock()
        let inFlight = ReplayerTests.request("in-flight", createdAt: clock.nowMilliseconds)
        let later = ReplayerTests.request("later", createdAt: clock.nowMilliseconds + 1)
        let source = RemovableSource([inFlight, later])
        let transport = CancellableTransport()
        let replayer = Self.replayer(source, transport, clock)
        var sends = transport.sends.makeAsyncIterator()

        await replayer.kick(ReplayerTests.origin)
        let sent6 = await sends.next()
        #expect(sent6 == "in-flight")
        let stopped = Task { await replayer.stop(boundSeconds: 10) }
        // The stop's bound is a sleeper on the clock: the stop has begun.
        await clock.waitForSleepers(1)
        transport.answer("in-flight")
        await stopped.value
        #expect(source.inner.state(inFlight.id)?.status == .completed, "the outcome of the attempt in flight is not recorded")
        #expect(source.inner.state(later.id)?.status == .pending)
        #expect(transport.attemptHeaders.withLock { $0 } == ["in-flight#1"], "an attempt started after the stop")
        await replayer.kick(ReplayerTests.origin)
        #expect(transport.attemptHeaders.withLock { $0 } == ["in-flight#1"], "a kick after the stop started an attempt")
    }

    @Test func anAttemptStillInFlightAtTheStopBoundIsCancelled_AndNothingIsRecordedForIt() async throws {
        let clock = ManualReplayClock()
        let stuck = ReplayerTests.request("stuck", createdAt: clock.nowMilliseconds)
        let source = RemovableSource([stuck])
        let transport = CancellableTransport()
        let replayer = Self.replayer(source, transport, clock)
        var sends = transport.sends.makeAsyncIterator()

        await replayer.kick(ReplayerTests.origin)
        let sent7 = await sends.next()
        #expect(sent7 == "stuck")
        let stopped = Task { await replayer.stop(boundSeconds: 5) }
        await clock.waitForSleepers(1)
        clock.advance(by: 5000)
        await stopped.value
        #expect(transport.cancelled.withLock { $0 } == ["stuck"])
        // Its mark on disk makes a restart send it again, numbered higher: no outcome is made up.
        #expect(source.recorded(stuck.id).isEmpty)
    }
}

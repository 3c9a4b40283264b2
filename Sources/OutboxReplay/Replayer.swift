import Foundation
import OutboxHTTP
import OutboxModel
import OutboxQueue
import OutboxTelemetry

/// What the replayer sends through: the server's event loops in production (``UpstreamClient``),
/// a script in tests.
package protocol ReplayTransport: Sendable {
    func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8],
              maxResponseBytes: Int) async -> Result<CollectedResponse, UpstreamError>
}

/// Delivers stored operations: per origin, up to `maxConcurrentPerOrigin` lanes at the same
/// time, one operation at a time within a lane, in the queue's order, with backoff between
/// retries; origins replay independently. Which lane goes next is the queue's choice
/// (`ReplaySource.nextWork`); the replayer only bounds how many attempts run at once.
///
/// Each origin has one scheduling loop. It runs while the origin has work and is online, and
/// starts an attempt whenever a slot is free and the queue names a lane that may go; each
/// attempt then runs as its own task. The loop parks while the origin is offline (the
/// reachability probe wakes it), while the admin switch says offline, while every slot is
/// busy (a finished attempt wakes it), or until the next retry is due. `kick` wakes a parked
/// loop (new operation, origin back, flush).
public actor Replayer {
    private let source: ReplaySource
    private let client: ReplayTransport
    private let reachability: Reachability
    private let policy: RetryPolicy
    private let unavailableStatuses: Set<Int>
    private let ttlMillis: Int64
    private let logger: Logger
    private let clock: ReplayClock
    private let metrics: Metrics?
    private let maxConcurrentPerOrigin: Int
    private var running: Set<Origin> = []
    private var parked: [Origin: CheckedContinuation<Void, Never>] = [:]
    private var kicked: Set<Origin> = []
    /// Attempts in flight per origin (one per lane).
    private var attempts: [Origin: Int] = [:]
    /// The earliest timer already set to wake each origin's loop, so that a loop parking again
    /// and again for the same retry does not start a sleeper each time.
    private var timers: [Origin: Int64] = [:]
    /// Origins with work recovered at startup whose first probe has not answered yet.
    private var unprobed: Set<Origin> = []
    private var random = SystemRandomNumberGenerator()

    /// Largest upstream response body kept with a completed or conflicted operation.
    static let maxStoredResponseBytes = 1 << 20

    /// - Parameter clock: the system clock in production; a `ManualReplayClock` in tests, so
    ///   backoff is stepped through instead of slept through.
    /// - Parameter maxConcurrentPerOrigin: lanes of one origin delivered at the same time (≥ 1).
    package init(source: ReplaySource, client: ReplayTransport, reachability: Reachability, policy: RetryPolicy,
         unavailableStatuses: Set<Int>, ttlSeconds: Double, logger: Logger,
         clock: ReplayClock = SystemReplayClock(), metrics: Metrics? = nil, maxConcurrentPerOrigin: Int = 8) {
        self.metrics = metrics
        self.maxConcurrentPerOrigin = max(1, maxConcurrentPerOrigin)
        self.source = source
        self.client = client
        self.reachability = reachability
        self.policy = policy
        self.unavailableStatuses = unavailableStatuses
        ttlMillis = Int64(ttlSeconds * 1000)
        self.logger = logger
        self.clock = clock
    }

    private func now() -> Int64 { clock.nowMilliseconds }

    /// Starts lanes for every origin with stored work (after a restart). Each origin is probed
    /// before its lane's first attempt: a restart says nothing about whether the origin came
    /// back, and an attempt against one that is still down would spend one of the operation's
    /// retries ahead of its schedule. An origin that fails the probe is offline, and its
    /// probes start the lane once it answers.
    package func startAll() {
        let origins = source.originsWithWork
        unprobed.formUnion(origins)
        for origin in origins {
            Task { await self.startAfterProbe(origin) }
        }
    }

    private func startAfterProbe(_ origin: Origin) async {
        let reachable = await reachability.probeOnce(origin, failure: "unreachable at startup")
        // Re-checked after the await: only this task clears the mark.
        unprobed.remove(origin)
        if reachable { kick(origin) }
    }

    /// Wakes `origin`'s loop, starting it if needed.
    package func kick(_ origin: Origin) {
        if let waiter = parked.removeValue(forKey: origin) {
            waiter.resume()
            return
        }
        if running.contains(origin) {
            // Busy starting an attempt or recording: look again before parking.
            kicked.insert(origin)
            return
        }
        running.insert(origin)
        Task { await self.runOrigin(origin) }
    }

    package func kickAll() {
        for origin in Set(source.originsWithWork).union(running) { kick(origin) }
    }

    private func runOrigin(_ origin: Origin) async {
        while true {
            kicked.remove(origin)
            let inFlight = attempts[origin, default: 0]
            if source.forcedOffline || unprobed.contains(origin) || !reachability.isOnline(origin)
                || inFlight >= maxConcurrentPerOrigin {
                await park(origin, until: nil)
                continue
            }
            switch source.nextWork(for: origin, now: now()) {
            case .idle where inFlight > 0:
                // Every lane with work is in flight: the next one to finish wakes the loop.
                await park(origin, until: nil)
            case .idle:
                // Re-checked after the await-free look: a kick while we looked restarts us.
                if kicked.contains(origin) { continue }
                running.remove(origin)
                return
            case .wait(let until):
                await park(origin, until: until)
            case .failDependent(let id, let state):
                await source.record(id, ReplayTransition.failDependency(current: state))
            case .attempt(let id, let request, let state):
                await start(id, request, state, origin: origin)
            }
        }
    }

    /// Parks the loop until kicked or, with a deadline, until then.
    private func park(_ origin: Origin, until deadline: Int64?) async {
        if kicked.contains(origin) { return }
        if let deadline {
            if deadline <= now() { return }
            if let set = timers[origin], set <= deadline, set > now() {
                // An earlier timer is running: it wakes the loop, which then parks again for this one.
            } else {
                timers[origin] = deadline
                let clock = self.clock
                Task {
                    // Cancelled, the sleep only ends early, and an early wake only makes the loop look
                    // again (this task runs on the actor).
                    try? await clock.sleep(until: deadline)
                    self.timerFired(origin, deadline: deadline)
                }
            }
        }
        await withCheckedContinuation { continuation in
            parked[origin] = continuation
        }
    }

    private func timerFired(_ origin: Origin, deadline: Int64) {
        if timers[origin] == deadline { timers[origin] = nil }
        parked.removeValue(forKey: origin)?.resume()
    }

    /// Starts an attempt of `id`: marks it in progress before the loop asks the queue again
    /// (so its lane is busy and not named twice), then sends it in a task of its own.
    private func start(_ id: UUID, _ request: OperationRequest, _ state: OperationState, origin: Origin) async {
        let started = now()
        if let expired = ReplayTransition.expire(current: state, createdAt: request.createdAt, now: started,
                                                 ttlSeconds: Double(ttlMillis) / 1000) {
            await source.record(id, expired)
            return
        }
        let inProgress = ReplayTransition.startAttempt(current: state, now: started)
        // Recovery turns inProgress back into pending anyway: no need to wait for this one.
        source.recordSoon(id, inProgress)
        attempts[origin, default: 0] += 1
        Task { await self.attempt(id, request, state, inProgress, origin: origin) }
    }

    private func attempt(_ id: UUID, _ request: OperationRequest, _ state: OperationState, _ inProgress: OperationState,
                         origin: Origin) async {
        var head = HTTPRequestHead(method: request.method, target: request.target, headers: request.headers)
        head.headers.replaceOrAdd(ControlHeaders.attemptName, String(state.retryCount + 1))
        let result = await client.send(to: origin, head: head, body: request.body, maxResponseBytes: Self.maxStoredResponseBytes)
        let finished = now()
        let outcome: AttemptOutcome
        var retryAfter: Double?
        switch result {
        case .success(let response):
            let stored = StoredResponse(status: response.head.status, headers: response.head.headers, body: response.body)
            outcome = AttemptOutcome(response: stored, retryableStatuses: policy.retryableStatuses)
            retryAfter = RetryAfter.seconds(in: response.head.headers, nowMilliseconds: finished)
            if unavailableStatuses.contains(response.head.status) {
                reachability.markOffline(origin, reason: "HTTP \(response.head.status)")
            } else {
                reachability.markOnline(origin)
            }
        case .failure(let error):
            outcome = AttemptOutcome(transportFailure: error.summary)
            if error.meansUnreachable { reachability.markOffline(origin, reason: error.summary) }
        }
        let next = ReplayTransition.nextState(current: inProgress, outcome: outcome, now: finished, policy: policy,
                                              retryAfter: retryAfter, random: &random)
        if logger.isEnabled(.info) {
            logger.info("replay", ["id": id.lowercasedText, "origin": origin.description,
                                   "attempt": String(state.retryCount + 1), "status": next.status.rawValue,
                                   "error": next.lastError ?? "-"])
        }
        metrics?.replayed(next.status)
        source.recordSoon(id, next)
        // Re-read after the await: other attempts of the origin started and ended meanwhile.
        attempts[origin, default: 1] -= 1
        if attempts[origin] == 0 { attempts[origin] = nil }
        kick(origin)
    }
}

/// The queue wakes lanes through this seam; it never holds the replayer itself.
extension Replayer: LaneWaker {}

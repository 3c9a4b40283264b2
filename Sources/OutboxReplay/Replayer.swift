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

/// Delivers stored operations, one lane per origin: one operation at a time per
/// origin, in the queue's order, with backoff between retries; origins replay independently.
///
/// A lane runs while its origin has work and is online; it parks while the origin is offline
/// (the reachability probe wakes it), while the admin switch says offline, or until the next
/// retry is due. `kick` wakes a parked lane (new operation, origin back, flush). Outcomes are
/// written behind the lane, which runs at most ``OutcomeWindow/redeliveryBound`` of them ahead
/// of the disk: what a `kill -9` makes it send again.
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
    private var running: Set<Origin> = []
    private var parked: [Origin: CheckedContinuation<Void, Never>] = [:]
    private var kicked: Set<Origin> = []
    /// Origins with work recovered at startup whose first probe has not answered yet.
    private var unprobed: Set<Origin> = []
    private var random = SystemRandomNumberGenerator()

    /// Largest upstream response body kept with a completed or conflicted operation.
    static let maxStoredResponseBytes = 1 << 20

    /// - Parameter clock: the system clock in production; a `ManualReplayClock` in tests, so
    ///   backoff is stepped through instead of slept through.
    package init(source: ReplaySource, client: ReplayTransport, reachability: Reachability, policy: RetryPolicy,
         unavailableStatuses: Set<Int>, ttlSeconds: Double, logger: Logger,
         clock: ReplayClock = SystemReplayClock(), metrics: Metrics? = nil) {
        self.metrics = metrics
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

    /// Wakes `origin`'s lane, starting it if needed.
    package func kick(_ origin: Origin) {
        if let waiter = parked.removeValue(forKey: origin) {
            waiter.resume()
            return
        }
        if running.contains(origin) {
            // Busy with an attempt: look again before parking.
            kicked.insert(origin)
            return
        }
        running.insert(origin)
        Task { await self.runLane(origin) }
    }

    package func kickAll() {
        for origin in Set(source.originsWithWork).union(running) { kick(origin) }
    }

    private func runLane(_ origin: Origin) async {
        // The lane's outcomes not yet on disk. It lives as long as this run of the lane, and the
        // run ends only once they are written, so a lane started again starts with none.
        let window = OutcomeWindow()
        while true {
            // Before choosing work, so that what is chosen is current when it is sent.
            await window.waitForRoom()
            kicked.remove(origin)
            if source.forcedOffline || unprobed.contains(origin) || !reachability.isOnline(origin) {
                await park(origin, until: nil)
                continue
            }
            switch source.nextWork(for: origin, now: now()) {
            case .idle:
                // Re-checked after the await-free scan: a kick while we looked restarts us.
                if kicked.contains(origin) { continue }
                if window.unwritten > 0 {
                    // Ends only once they are written (one sync, normally): new work for the
                    // lane meanwhile waits that long, its kick leaves its mark, and the loop
                    // looks again in any case.
                    await window.waitUntilWritten()
                    continue
                }
                running.remove(origin)
                return
            case .wait(let until):
                await park(origin, until: until)
            case .failDependent(let id, let state):
                await source.record(id, ReplayTransition.failDependency(current: state))
            case .attempt(let id, let request, let state):
                await attempt(id, request, state, origin: origin, window: window)
            }
        }
    }

    /// Parks the lane until kicked or, with a deadline, until then.
    private func park(_ origin: Origin, until deadline: Int64?) async {
        if kicked.contains(origin) { return }
        if let deadline {
            if deadline <= now() { return }
            let clock = self.clock
            Task {
                // Cancelled, the sleep only ends early, and an early wake only makes the lane look
                // again (this task runs on the actor).
                try? await clock.sleep(until: deadline)
                self.wake(origin)
            }
        }
        await withCheckedContinuation { continuation in
            parked[origin] = continuation
        }
    }

    private func wake(_ origin: Origin) {
        parked.removeValue(forKey: origin)?.resume()
    }

    private func attempt(_ id: UUID, _ request: OperationRequest, _ state: OperationState, origin: Origin,
                         window: OutcomeWindow) async {
        let started = now()
        if let expired = ReplayTransition.expire(current: state, createdAt: request.createdAt, now: started,
                                                 ttlSeconds: Double(ttlMillis) / 1000) {
            await source.record(id, expired)
            return
        }
        let inProgress = ReplayTransition.startAttempt(current: state, now: started)
        // Not counted in the window, whose bound is on what a crash sends again: recovery turns
        // inProgress back into pending, so on disk or not, this record changes nothing a restart
        // sends. Until the attempt's outcome is on disk the operation is sent again anyway, as
        // the one in flight or as one whose outcome the window counts; and the log keeps append
        // order, so once that outcome is on disk this record is too.
        source.recordSoon(id, inProgress)
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
        source.recordSoon(id, next, written: window.track())
    }
}

/// The queue wakes lanes through this seam; it never holds the replayer itself.
extension Replayer: LaneWaker {}

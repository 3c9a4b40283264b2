import Foundation
import OutboxCredentials
import OutboxHTTP
import OutboxModel
import OutboxQueue
import OutboxTelemetry

/// What the replayer sends through: the server's event loops in production (``UpstreamClient``),
/// a script in tests.
package protocol ReplayTransport: Sendable {
    func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8],
              maxResponseBytes: Int) async -> Result<CollectedResponse, UpstreamError>
    /// `send`, running `whileInFlight` once the request is on its way (work for after the
    /// response, reading the next request, then overlaps the upstream's), and ending the call
    /// at once when `cancellation` is cancelled: the exchange is abandoned, its connection
    /// closed rather than reused, and the result is a failure. The replayer then acts on the
    /// cancellation's reason, not on that failure.
    func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8], maxResponseBytes: Int,
              cancellation: CallCancellation,
              whileInFlight: @Sendable () -> Void) async -> Result<CollectedResponse, UpstreamError>
}

extension ReplayTransport {
    /// A transport that cannot tell when the request left runs `whileInFlight` first; one that
    /// cannot cancel finishes the call, and the replayer still acts on the cancellation.
    package func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8], maxResponseBytes: Int,
                      cancellation: CallCancellation,
                      whileInFlight: @Sendable () -> Void) async -> Result<CollectedResponse, UpstreamError> {
        whileInFlight()
        return await send(to: origin, head: head, body: body, maxResponseBytes: maxResponseBytes)
    }
}

/// Delivers stored operations: per origin, up to `maxConcurrentPerOrigin` lanes at the same
/// time, one operation at a time within a lane, in the queue's order, with backoff between
/// retries; origins replay independently. Which lane goes next is the queue's choice
/// (`ReplaySource.takeWork`); the replayer only bounds how many attempts run at once.
///
/// Each origin has one scheduling loop. It runs while the origin has work and is online, and
/// starts a worker whenever a slot is free and the queue names a lane that may go; a worker
/// sends that operation, then the next one the queue names, until nothing can start at once.
/// The loop parks while the origin is offline (the reachability probe wakes it), while the
/// admin switch says offline, while every slot is busy (a worker that stops wakes it), or
/// until the next retry is due. `kick` wakes a parked loop (new operation, origin back, flush).
///
/// Outcomes are written behind the lanes; each lane has an ``OutcomeWindow`` and runs at most
/// ``OutcomeWindow/redeliveryBound`` outcomes ahead of the disk: what a `kill -9` makes it send
/// again. Before an attempt is sent, the record counting it (its mark, written ahead by the
/// queue) is on disk, so a resend after a crash carries a higher `Outbox-Attempt`.
///
/// Every attempt ends: one cancellation per attempt, which the attempt's total deadline
/// (`attemptTimeoutSeconds`, timed by the injected clock: a transport failure, retried after
/// backoff), a removal of its operation (nothing recorded, never sent again) and a stop
/// after its bound all cancel; the transport then closes the call's connection. `stop` lets
/// the attempts in flight finish (bounded), so a clean stop sends nothing twice.
///
/// The queue does not wake an origin for the replayer's own state changes (a worker asks for
/// the next work itself); after each step a worker wakes the loop only when another slot could
/// start something. With an `executor` (an event loop's, in production) every task of the
/// replayer prefers it, so the actor, the exchange and the response's hand-back stay on one
/// thread; with `workerExecutors` (one per event loop) the workers spread over them instead,
/// each on the one with the fewest, so the lanes in flight use every loop. A lane's order does
/// not depend on where its worker runs: the queue hands out a lane's next operation only once
/// the previous one's outcome is in.
public actor Replayer {
    private let source: ReplaySource
    private let client: ReplayTransport
    private let reachability: Reachability
    private let policy: RetryPolicy
    private let unavailableStatuses: Set<Int>
    /// `replay.authStatuses`: answers that hold an operation for fresh credentials.
    private let authStatuses: Set<Int>
    /// Where an origin's credentials come from at send time (SPEC §10); nil: none replaced.
    private let credentials: (any CredentialSource)?
    private let ttlMillis: Int64
    private let logger: Logger
    private let clock: ReplayClock
    private let metrics: Metrics?
    private let maxConcurrentPerOrigin: Int
    /// The total time one attempt may take, head and body (`replay.attemptTimeoutSeconds`).
    private let attemptTimeoutSeconds: Double
    private let attemptTimeoutMillis: Int64
    /// Where the replayer's tasks run, when set (see the type's comment).
    private let executor: (any TaskExecutor)?
    /// Where the workers run, when set: each starts on the one with the fewest workers, so
    /// the lanes in flight spread over the event loops, each exchange on its worker's loop.
    private let workerExecutors: [any TaskExecutor]
    /// Workers running on each of `workerExecutors`.
    private var workersOnExecutor: [Int]
    private var running: Set<Origin> = []
    private var parked: [Origin: CheckedContinuation<Void, Never>] = [:]
    private var kicked: Set<Origin> = []
    /// Attempt slots in use per origin: workers, each sending one operation at a time.
    private var workers: [Origin: Int] = [:]
    /// The earliest timer already set to wake each origin's loop, so that a loop parking again
    /// and again for the same retry does not start a sleeper each time.
    private var timers: [Origin: Int64] = [:]
    /// Each lane's outcomes not yet on disk. Kept across runs of the lane, so the bound holds
    /// when a lane stops and starts again before its writes are done; a window is dropped once
    /// it has nothing unwritten and no attempt of its lane is under way.
    private var windows: [LaneKey: OutcomeWindow] = [:]
    /// Lanes with an attempt between its wait for room and its outcome being tracked.
    private var busyLanes: Set<LaneKey> = []
    /// Origins with work recovered at startup whose first probe has not answered yet.
    private var unprobed: Set<Origin> = []
    private var random = SystemRandomNumberGenerator()
    /// Attempts whose request is being sent, with the time their deadline cancels them: a few
    /// (the slots in use), so a list, looked through by identity, costs less than a table by id.
    private var sending: [(cancellation: CallCancellation, deadline: Int64)] = []
    /// The one timer that cancels the sends past their deadline, and the time it fires; none
    /// while nothing is being sent (one for every send would be a task per operation).
    private var deadlineTimer: (at: Int64, task: Task<Void, Never>)?
    /// Set by `stop`: no attempt starts any more.
    private var stopping = false
    /// `stop`, waiting for the last worker to finish.
    private var stopWaiters: [CheckedContinuation<Void, Never>] = []

    /// Largest upstream response body kept with a completed or conflicted operation; a longer
    /// one is counted and omitted (`StoredResponse.omittedBodySize`), never kept cut.
    static let maxStoredResponseBytes = StoredResponse.maxBodyBytes

    /// - Parameter clock: the system clock in production; a `ManualReplayClock` in tests, so
    ///   backoff is stepped through instead of slept through.
    /// - Parameter maxConcurrentPerOrigin: lanes of one origin delivered at the same time (≥ 1).
    /// - Parameter attemptTimeoutSeconds: the longest one attempt may take, response body
    ///   included (> 0).
    /// - Parameter executor: where the replayer's tasks run; nil: the cooperative pool.
    /// - Parameter workerExecutors: where the workers (one lane in flight each) run, spread
    ///   evenly; empty: on `executor`.
    package init(source: ReplaySource, client: ReplayTransport, reachability: Reachability, policy: RetryPolicy,
         unavailableStatuses: Set<Int>, authStatuses: Set<Int> = [], credentials: (any CredentialSource)? = nil,
         ttlSeconds: Double, logger: Logger,
         clock: ReplayClock = SystemReplayClock(), metrics: Metrics? = nil, maxConcurrentPerOrigin: Int = 8,
         attemptTimeoutSeconds: Double = 60,
         executor: (any TaskExecutor)? = nil, workerExecutors: [any TaskExecutor] = []) {
        self.executor = executor
        self.workerExecutors = workerExecutors
        workersOnExecutor = [Int](repeating: 0, count: workerExecutors.count)
        self.metrics = metrics
        self.maxConcurrentPerOrigin = max(1, maxConcurrentPerOrigin)
        self.attemptTimeoutSeconds = attemptTimeoutSeconds
        attemptTimeoutMillis = max(1, WallClock.milliseconds(attemptTimeoutSeconds))
        self.source = source
        self.client = client
        self.reachability = reachability
        self.policy = policy
        self.unavailableStatuses = unavailableStatuses
        self.authStatuses = authStatuses
        self.credentials = credentials
        ttlMillis = WallClock.milliseconds(ttlSeconds)
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
            Task(executorPreference: executor) { await self.startAfterProbe(origin) }
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
        if stopping { return }
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
        Task(executorPreference: executor) { await self.runOrigin(origin) }
    }

    package func kickAll() {
        for origin in Set(source.originsWithWork).union(running) { kick(origin) }
    }

    private func runOrigin(_ origin: Origin) async {
        while true {
            kicked.remove(origin)
            if stopping {
                running.remove(origin)
                return
            }
            let inFlight = workers[origin, default: 0]
            if isBlocked(origin) || inFlight >= maxConcurrentPerOrigin {
                await park(origin, until: nil)
                continue
            }
            switch source.takeWork(for: origin, now: now()) {
            case .idle where inFlight > 0:
                // Every lane with work is in flight: a worker that runs out of work wakes the loop.
                await park(origin, until: nil)
            case .idle:
                // Re-checked after the await-free look: a kick while we looked restarts us.
                if kicked.contains(origin) { continue }
                sweepWindows()
                running.remove(origin)
                return
            case .wait(let until):
                await park(origin, until: until)
            case .failDependent(let id, let state):
                await source.record(id, ReplayTransition.failDependency(current: state))
            case .attempt(let attempt):
                if let expired = expiry(of: attempt) {
                    await source.record(attempt.id, expired)
                    continue
                }
                workers[origin, default: 0] += 1
                let slot = workersOnExecutor.indices.min { workersOnExecutor[$0] < workersOnExecutor[$1] }
                if let slot { workersOnExecutor[slot] += 1 }
                Task(executorPreference: slot.map { workerExecutors[$0] } ?? executor) {
                    await self.work(attempt, origin: origin)
                    if let slot { await self.workerLeft(slot) }
                }
            }
        }
    }

    private func workerLeft(_ slot: Int) {
        workersOnExecutor[slot] -= 1
    }

    /// Whether `origin`'s attempts must not start now: the replayer is stopping, the admin
    /// switch says offline, the origin is offline, or its first probe after a restart has not
    /// answered.
    private func isBlocked(_ origin: Origin) -> Bool {
        stopping || source.forcedOffline || unprobed.contains(origin) || !reachability.isOnline(origin)
    }

    /// Parks the loop until kicked or, with a deadline, until then.
    private func park(_ origin: Origin, until deadline: Int64?) async {
        if kicked.contains(origin) { return }
        if let deadline {
            if deadline <= now() { return }
            // A timer still running for an earlier time wakes the loop, which then parks again
            // for this one: no second sleeper.
            let covered = timers[origin].map { $0 <= deadline && $0 > now() } ?? false
            if !covered {
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

    /// A lane as the replayer tells them apart: the origin and the ordering key.
    private struct LaneKey: Hashable, Sendable {
        var origin: Origin
        var orderingKey: String?
    }

    private func window(for key: LaneKey) -> OutcomeWindow {
        if let window = windows[key] { return window }
        let source = self.source
        let window = OutcomeWindow(hurry: { source.hurryWrites() })
        windows[key] = window
        return window
    }

    /// Drops the windows with nothing to wait for; many keys must not mean many windows kept.
    private func sweepWindows() {
        windows = windows.filter { $0.value.unwritten > 0 || busyLanes.contains($0.key) }
    }

    /// The `failed` ("expired") state of an attempt taken past its operation's TTL: it is
    /// recorded instead of sent.
    private func expiry(of attempt: ReplayAttempt) -> OperationState? {
        ReplayTransition.expire(current: attempt.inProgress, createdAt: attempt.request.createdAt, now: now(),
                                ttlSeconds: Double(ttlMillis) / 1000)
    }

    /// The next attempt of `origin` a worker may go on with at once, recording on the way those
    /// taken past their TTL; nil when nothing can start at once.
    private func nextAttempt(of origin: Origin) async -> ReplayAttempt? {
        // Each round either returns or records one operation as expired: bounded by the queue.
        while !isBlocked(origin), case .attempt(let attempt) = source.takeWork(for: origin, now: now()) {
            guard let expired = expiry(of: attempt) else { return attempt }
            await source.record(attempt.id, expired)
        }
        return nil
    }

    /// One of the origin's attempt slots: sends `first`, then goes on with whatever lane the
    /// queue names next, until nothing can start at once; then it wakes the loop, which
    /// handles waiting and dependency failures. Taking the next operation here rather than in
    /// the loop saves a task switch per operation on a lane with a backlog.
    private func work(_ first: ReplayAttempt, origin: Origin) async {
        var attempt = first
        while true {
            let lane = LaneKey(origin: origin, orderingKey: attempt.request.orderingKey)
            busyLanes.insert(lane)
            let window = window(for: lane)
            // The lane sends only while fewer than the bound of its outcomes are unwritten; one
            // sync normally frees the room. Other lanes go on meanwhile (the actor is free).
            await window.waitForRoom()
            let backingOff = await send(attempt, origin: origin, window: window)
            busyLanes.remove(lane)
            if windows.count > Self.windowSweepThreshold { sweepWindows() }
            // Re-checked after the await: the origin may have gone offline meanwhile.
            guard let next = await nextAttempt(of: origin) else { break }
            attempt = next
            wakeLoopIfMoreCanStart(origin, backingOff: backingOff)
        }
        workers[origin, default: 1] -= 1
        if workers[origin] == 0 { workers[origin] = nil }
        if sending.isEmpty {
            deadlineTimer?.task.cancel()
            deadlineTimer = nil
        }
        // Nothing more to send at once: what this worker left unwritten need not wait for
        // company in the log.
        source.hurryWrites()
        if workers.isEmpty && stopping {
            stopWaiters.forEach { $0.resume() }
            stopWaiters = []
        }
        kick(origin)
    }

    /// The queue leaves this origin's wake-ups to its replayer: once a worker has taken its next
    /// operation, the parked loop is woken when a free slot could start another lane (the
    /// outcome made one ready, or resolved a dependency), or when the lane just left backs off
    /// (the loop sets the timer for its retry).
    private func wakeLoopIfMoreCanStart(_ origin: Origin, backingOff: Bool) {
        guard parked[origin] != nil, workers[origin, default: 0] < maxConcurrentPerOrigin else { return }
        if backingOff || source.hasWork(for: origin, now: now()) { kick(origin) }
    }

    /// Windows kept before the replayer drops the settled ones.
    private static let windowSweepThreshold = 4096

    /// Sends the attempt and records its outcome; true when the operation is to be retried
    /// after a delay. An attempt whose mark is not on disk waits for it first; one cancelled
    /// before it was sent (its operation removed), or taken as the replayer stops, is not sent.
    private func send(_ attempt: ReplayAttempt, origin: Origin, window: OutcomeWindow) async -> Bool {
        let (id, request) = (attempt.id, attempt.request)
        if let mark = attempt.mark {
            // Ahead marks are deferred writes: this lane now waits for them.
            source.hurryWrites()
            let written = await mark.written()
            // Re-checked after the await: the operation may have been removed meanwhile.
            if attempt.cancellation.reason == .removed { return false }
            if !written {
                // The attempt cannot be counted on disk: it is not sent, and the lane backs off
                // as after any failed attempt rather than spin against a failing log.
                return record(attempt, outcome: AttemptOutcome(transportFailure: "the attempt could not be recorded"),
                              retryAfter: nil, origin: origin, window: window)
            }
        }
        if attempt.cancellation.reason == .removed { return false }
        if stopping {
            source.release(attempt)
            return false
        }
        var head = HTTPRequestHead(method: request.method, target: request.target, headers: request.headers)
        if let credentials {
            // Fresh credentials replace the stored ones of the same names in what is sent; the
            // stored request stays as it was.
            switch await credentials.answer(for: origin) {
            case .none:
                break
            case .headers(let fields):
                for field in fields { head.headers.replaceOrAdd(field.name, field.value) }
            case .failed(let reason, let failures):
                // Nothing is sent without them: the lane waits, its attempt's number given back,
                // and tries again after a backoff.
                return record(attempt, outcome: .credentialsUnavailable(reason: reason, failures: failures), retryAfter: nil,
                              origin: origin, window: window)
            }
            // Re-checked after the await: the operation may have been removed, or the replayer told to stop.
            if attempt.cancellation.reason == .removed { return false }
            if stopping {
                source.release(attempt)
                return false
            }
        }
        head.headers.replaceOrAdd(ControlHeaders.attemptName, String(attempt.number))
        let source = self.source
        sendStarted(attempt)
        let result = await client.send(to: origin, head: head, body: request.body, maxResponseBytes: Self.maxStoredResponseBytes,
                                       cancellation: attempt.cancellation, whileInFlight: { source.readAhead(after: id) })
        sendEnded(attempt.cancellation)
        attempt.cancellation.callEnded()
        let finished = now()
        let outcome: AttemptOutcome
        var retryAfter: Double?
        switch (result, attempt.cancellation.reason) {
        case (_, .removed?):
            // Gone from the queue: nothing to record, whatever came back.
            logger.info("replay_cancelled", ["id": id.lowercasedText, "origin": origin.description,
                                             "attempt": String(attempt.number), "reason": "removed"])
            return false
        case (_, .stopping?):
            // Its mark says it may have been sent: a restart sends it again, numbered higher.
            logger.info("replay_cancelled", ["id": id.lowercasedText, "origin": origin.description,
                                             "attempt": String(attempt.number), "reason": "stopping"])
            return false
        case (.failure, .deadline(let seconds)?):
            // The origin answers, too slowly (a trickle, an endless body): not unreachable.
            outcome = AttemptOutcome(transportFailure: "attempt timed out after \(Self.seconds(seconds)) s")
        case (.success(let response), _):
            let stored = StoredResponse(status: response.head.status, headers: response.head.headers, body: response.body,
                                        omittedBodySize: response.truncated ? response.bodySize : nil)
            outcome = AttemptOutcome(response: stored, retryableStatuses: policy.retryableStatuses, authStatuses: authStatuses)
            reachability.setAuthRequired(origin, authStatuses.contains(response.head.status))
            retryAfter = RetryAfter.seconds(in: response.head.headers, nowMilliseconds: finished)
            if unavailableStatuses.contains(response.head.status) {
                reachability.markOffline(origin, reason: "HTTP \(response.head.status)")
            } else {
                reachability.markOnline(origin)
            }
        case (.failure(let error), nil):
            // Outbox's own lack of a descriptor is `notSent`: no retry spent, the origin not
            // blamed; a target Outbox refuses to reach fails at once.
            outcome = AttemptOutcome(failure: error)
            if error.meansUnreachable { reachability.markOffline(origin, reason: error.summary) }
        }
        return record(attempt, outcome: outcome, retryAfter: retryAfter, origin: origin, window: window)
    }

    /// Records the outcome of `attempt` behind the lane; true when it is to be retried after a
    /// delay.
    private func record(_ attempt: ReplayAttempt, outcome: AttemptOutcome, retryAfter: Double?, origin: Origin,
                        window: OutcomeWindow) -> Bool {
        let id = attempt.id
        let next = ReplayTransition.nextState(current: attempt.inProgress, outcome: outcome, now: now(), policy: policy,
                                              retryAfter: retryAfter, random: &random)
        if logger.isEnabled(.info) {
            logger.info("replay", ["id": id.lowercasedText, "origin": origin.description,
                                   "attempt": String(attempt.number), "status": next.status.rawValue,
                                   "error": next.lastError ?? "-"])
        }
        if case .authRequired = outcome {
            credentials?.refused(origin)
            metrics?.replayNeededAuth()
        } else {
            metrics?.replayed(next.status)
        }
        source.recordSoon(id, next, replaying: origin, written: window.track())
        return next.status == .pending
    }

    /// `seconds` as a config value reads: `2`, `0.5`.
    static func seconds(_ seconds: Double) -> String {
        Int(exactly: seconds).map(String.init) ?? String(seconds)
    }

    // MARK: Deadlines

    /// Notes `attempt` as being sent, and makes sure the deadline timer fires by its deadline.
    private func sendStarted(_ attempt: ReplayAttempt) {
        let deadline = now() + attemptTimeoutMillis
        sending.append((attempt.cancellation, deadline))
        if let timer = deadlineTimer, timer.at <= deadline { return }
        armDeadlineTimer(at: deadline)
    }

    private func sendEnded(_ cancellation: CallCancellation) {
        if let index = sending.firstIndex(where: { $0.cancellation === cancellation }) { sending.remove(at: index) }
    }

    private func armDeadlineTimer(at deadline: Int64) {
        deadlineTimer?.task.cancel()
        let clock = self.clock
        let task = Task {
            // Cancelled: nothing is being sent any more, or an earlier deadline took over.
            do { try await clock.sleep(untilAttemptDeadline: deadline) } catch { return }
            self.deadlinesPassed(timerAt: deadline)
        }
        deadlineTimer = (deadline, task)
    }

    /// Cancels every send past its deadline, then sets the timer for the next one.
    private func deadlinesPassed(timerAt: Int64) {
        // A timer replaced after it fired: the newer one decides.
        guard deadlineTimer?.at == timerAt else { return }
        deadlineTimer = nil
        let now = now()
        var next: Int64?
        for send in sending where !send.cancellation.isCancelled {
            if send.deadline <= now {
                send.cancellation.cancel(.deadline(seconds: attemptTimeoutSeconds))
            } else {
                next = min(next ?? send.deadline, send.deadline)
            }
        }
        if let next { armDeadlineTimer(at: next) }
    }

    // MARK: Stopping

    /// Stops starting attempts and returns once those in flight have ended and their outcomes
    /// are handed to the queue (which writes them before it closes): a clean stop sends nothing
    /// twice. Attempts still in flight `boundSeconds` from now are cancelled then; their marks
    /// make a restart send them again, numbered higher. Taken attempts not yet sent go back.
    package func stop(boundSeconds: Double) async {
        stopping = true
        for waiter in parked.values { waiter.resume() }
        parked = [:]
        if workers.isEmpty { return }
        let bound = now() + WallClock.milliseconds(boundSeconds)
        let clock = self.clock
        let timer = Task {
            do { try await clock.sleep(until: bound) } catch { return }
            self.cancelInFlight(.stopping)
        }
        await withCheckedContinuation { stopWaiters.append($0) }
        timer.cancel()
    }

    private func cancelInFlight(_ reason: CallCancellation.Reason) {
        for send in sending { send.cancellation.cancel(reason) }
    }
}

/// The queue wakes lanes through this seam; it never holds the replayer itself.
extension Replayer: LaneWaker {}

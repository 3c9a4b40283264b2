@testable import OutboxConfig
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxReplay
import Testing

@Suite("Replay outcomes and operation state transitions")
struct ReplayOutcomeTests {
    static let retryable = Set(OutboxConfig.Retry().retryableStatuses)

    static func response(_ status: Int, headers: HTTPHeaders = [:]) -> StoredResponse {
        StoredResponse(status: status, headers: headers, body: Array("body \(status)".utf8))
    }

    enum Kind: String { case completed, conflict, retry, failed, notSent, authRequired }

    static func kind(_ outcome: AttemptOutcome) -> Kind {
        switch outcome {
        case .completed: .completed
        case .conflict: .conflict
        case .retry: .retry
        case .failed: .failed
        case .notSent: .notSent
        case .authRequired: .authRequired
        case .credentialsUnavailable: .notSent
        }
    }

    @Test("an upstream status maps to its replay outcome", arguments: [
        (200, Kind.completed), (201, .completed), (204, .completed), (301, .completed), (304, .completed),
        (409, .conflict),
        (408, .retry), (425, .retry), (429, .retry), (500, .retry), (502, .retry), (503, .retry), (504, .retry),
        (400, .failed), (401, .failed), (404, .failed), (422, .failed), (501, .failed), (505, .failed), (101, .failed),
    ])
    func statusOutcome(status: Int, expected: Kind) {
        #expect(Self.kind(AttemptOutcome(response: Self.response(status), retryableStatuses: Self.retryable)) == expected)
    }

    @Test("a transport failure is retried")
    func transportFailureIsRetried() {
        #expect(AttemptOutcome(transportFailure: "connect failed: refused") == .retry(error: "connect failed: refused"))
    }

    @Test("an attempt Outbox had no socket for is not sent; the other failures before a response (connect, timeout) are transport failures, retried")
    func localShortageIsNotSent() {
        #expect(AttemptOutcome(failure: .localResourcesExhausted("socket: Too many open files"))
            == .notSent(error: "local resources exhausted: socket: Too many open files"))
        #expect(AttemptOutcome(failure: .connectFailed("connect: Connection refused"))
            == .retry(error: "connect failed: connect: Connection refused"))
        #expect(AttemptOutcome(failure: .responseTimeout) == .retry(error: "response timeout"))
    }

    @Test("an attempt to a target Outbox refuses (its own listener, an internal address) fails at once: no retry reaches it")
    func refusedTargetFails() {
        #expect(AttemptOutcome(failure: .targetRefused(.ownListener(address: "127.0.0.1:8080")))
            == .failed(error: "refused: the target resolves to 127.0.0.1:8080, Outbox's own listener"))
        #expect(AttemptOutcome(failure: .targetRefused(.internalAddress(address: "169.254.169.254")))
            == .failed(error: "refused: the target resolves to the internal address 169.254.169.254"))
    }

    static let now: Int64 = 1_000_000

    /// The attempt in progress of an operation whose retries are all spent (`maxRetries` of the
    /// preset's policy), and the state `ending` it leads to at `now`.
    static func lastRetryAttempt(preset: RetryPreset, maxRetries: Int, ending: AttemptOutcome,
                                 retryAfter: Double?) -> (inProgress: OperationState, next: OperationState) {
        var config = OutboxConfig.Retry(preset: preset)
        config.maxRetries = maxRetries
        var random = ReplayTestRandom(seed: 7)
        var state = OperationState()
        state.retryCount = maxRetries
        let inProgress = ReplayTransition.startAttempt(current: state, now: now)
        let next = ReplayTransition.nextState(current: inProgress, outcome: ending, now: now, policy: RetryPolicy(config),
                                              retryAfter: retryAfter, random: &random)
        return (inProgress, next)
    }

    @Test("an attempt not sent spends no retry, even the last one, and is tried again a second later")
    func notSentSpendsNoRetry() {
        let (inProgress, next) = Self.lastRetryAttempt(preset: .linear, maxRetries: 1, ending: .notSent(error: "local resources exhausted: x"),
                                                       retryAfter: 30)
        #expect(next.status == .pending)
        #expect(next.retryCount == 1, "no retry is spent")
        #expect(next.attempts == OperationState().attempts, "the next attempt carries the same Outbox-Attempt number")
        #expect(inProgress.attempts == OperationState().attempts + 1)
        #expect(next.nextAttemptAt == Self.now + 1000, "neither the backoff nor a Retry-After applies")
        #expect(next.lastError == "local resources exhausted: x")
    }

    @Test("a status in authStatuses holds the operation: ahead of 409 and the retryable ones, and only when configured")
    func authStatusesHold() {
        #expect(AttemptOutcome(response: Self.response(401), retryableStatuses: Self.retryable, authStatuses: [401]) == .authRequired(status: 401))
        #expect(AttemptOutcome(response: Self.response(403), retryableStatuses: Self.retryable, authStatuses: [401, 403])
            == .authRequired(status: 403))
        #expect(Self.kind(AttemptOutcome(response: Self.response(403), retryableStatuses: Self.retryable, authStatuses: [401])) == .failed)
        #expect(Self.kind(AttemptOutcome(response: Self.response(429), retryableStatuses: [429], authStatuses: [429])) == .authRequired)
        #expect(Self.kind(AttemptOutcome(response: Self.response(401), retryableStatuses: Self.retryable, authStatuses: [])) == .failed)
    }

    @Test("a held operation stays pending with its retries unspent, its error auth: <status>, due again after maxDelaySeconds")
    func authRequiredSpendsNoRetry() {
        // Every retry spent: a 503 now would fail it.
        let (inProgress, next) = Self.lastRetryAttempt(preset: .default, maxRetries: 2, ending: .authRequired(status: 401), retryAfter: 5)
        #expect(next.status == .pending)
        #expect(next.retryCount == 2, "no retry is spent")
        #expect(next.attempts == inProgress.attempts, "the attempt was made: its number stays counted")
        #expect(next.lastError == "auth: 401")
        #expect(next.nextAttemptAt == Self.now + 60_000, "held until maxDelaySeconds, whatever Retry-After says")
    }

    @Test("only configured statuses are retried, and 409 stays a conflict even if configured")
    func retryableStatusesComeFromConfig() {
        #expect(Self.kind(AttemptOutcome(response: Self.response(503), retryableStatuses: [429])) == .failed)
        #expect(Self.kind(AttemptOutcome(response: Self.response(418), retryableStatuses: [418])) == .retry)
        #expect(Self.kind(AttemptOutcome(response: Self.response(409), retryableStatuses: [409])) == .conflict)
    }

    /// Runs the replayer's state machine over a scripted list of upstream statuses, starting
    /// each attempt when the previous backoff has elapsed; returns the final state and the
    /// number of attempts made.
    static func replay(_ statuses: [Int], policy: RetryPolicy, retryAfter: Double? = nil) -> (OperationState, Int, [Int64]) {
        var random = ReplayTestRandom(seed: 7)
        var state = OperationState()
        var now: Int64 = 1_000_000
        var attempts = 0
        var waits: [Int64] = []
        for status in statuses where !state.status.isFinished {
            if let next = state.nextAttemptAt {
                waits.append(next - now)
                now = next
            }
            state = ReplayTransition.startAttempt(current: state, now: now)
            attempts += 1
            let outcome = AttemptOutcome(response: response(status), retryableStatuses: policy.retryableStatuses)
            state = ReplayTransition.nextState(current: state, outcome: outcome, now: now, policy: policy,
                                               retryAfter: retryAfter, random: &random)
        }
        return (state, attempts, waits)
    }

    @Test("503, 503, 201 completes after three attempts with two retries")
    func completesAfterTwoRetries() {
        let policy = RetryPolicy(OutboxConfig.Retry(preset: .linear))
        let (state, attempts, waits) = Self.replay([503, 503, 201, 500], policy: policy)
        #expect(state.status == .completed)
        #expect(attempts == 3)
        #expect(state.retryCount == 2)
        #expect(state.response == Self.response(201))
        #expect(state.lastError == nil)
        #expect(state.nextAttemptAt == nil)
        #expect(waits == [5000, 5000])
    }

    @Test("retries exhausted after 1 + maxRetries attempts fail the operation")
    func retriesExhaustedFails() {
        var config = OutboxConfig.Retry(preset: .immediate)
        config.maxRetries = 3
        let (state, attempts, _) = Self.replay(Array(repeating: 503, count: 10), policy: RetryPolicy(config))
        #expect(attempts == 4)
        #expect(state.status == .failed)
        #expect(state.retryCount == 3)
        #expect(state.lastError == "HTTP 503 (retries exhausted)")
        #expect(state.nextAttemptAt == nil)
    }

    @Test("maxRetries 0 fails on the first retryable outcome")
    func zeroRetriesFailsAtOnce() {
        var config = OutboxConfig.Retry()
        config.maxRetries = 0
        let (state, attempts, _) = Self.replay([503, 201], policy: RetryPolicy(config))
        #expect(attempts == 1)
        #expect(state.status == .failed)
    }

    @Test("Retry-After wins over the backoff delay")
    func retryAfterWins() {
        let policy = RetryPolicy(OutboxConfig.Retry(preset: .linear))
        let (_, _, waits) = Self.replay([429, 429, 200], policy: policy, retryAfter: 0.25)
        #expect(waits == [250, 250])
    }

    @Test("jittered backoff waits stay within 50–150 % of the nominal delays")
    func jitteredBackoffWaits() {
        let policy = RetryPolicy(OutboxConfig.Retry())
        let (state, _, waits) = Self.replay([503, 503, 503, 503, 503, 200], policy: policy)
        #expect(state.status == .completed)
        #expect(waits.count == 5)
        for (index, wait) in waits.enumerated() {
            let nominal = policy.nominalDelay(beforeRetry: index + 1) * 1000
            #expect(Double(wait) >= nominal * 0.5 && Double(wait) <= nominal * 1.5 + 1)
        }
    }

    @Test("409 keeps the response as conflict data, other statuses fail with HTTP n")
    func conflictAndFailure() {
        let policy = RetryPolicy(OutboxConfig.Retry())
        let (conflict, _, _) = Self.replay([409], policy: policy)
        #expect(conflict.status == .conflict)
        #expect(conflict.conflict == Self.response(409))
        #expect(conflict.response == nil)
        let (failed, attempts, _) = Self.replay([400, 200], policy: policy)
        #expect(failed.status == .failed)
        #expect(failed.lastError == "HTTP 400")
        #expect(attempts == 1)
    }

    @Test("starting an attempt marks it in progress at now, clears the backoff and counts it")
    func startAttempt() {
        let state = ReplayTransition.startAttempt(current: OperationState(retryCount: 2, nextAttemptAt: 50), now: 60)
        #expect(state == OperationState(status: .inProgress, retryCount: 2, lastAttemptAt: 60, nextAttemptAt: nil, attempts: 1))
    }

    @Test("operations older than the TTL that are not finished expire", arguments: [
        (OperationStatus.pending, 10_001 as Int64, true),
        (.inProgress, 10_001, true),
        (.pending, 10_000, false),
        (.completed, 99_999, false),
        (.failed, 99_999, false),
        (.conflict, 99_999, false),
    ])
    func ttlExpiry(status: OperationStatus, age: Int64, expires: Bool) {
        let createdAt: Int64 = 1_000
        let state = OperationState(status: status, nextAttemptAt: 5_000)
        let expired = ReplayTransition.expire(current: state, createdAt: createdAt, now: createdAt + age, ttlSeconds: 10)
        #expect((expired != nil) == expires)
        if let expired {
            #expect(expired.status == .failed)
            #expect(expired.lastError == "expired")
            #expect(expired.nextAttemptAt == nil)
        }
    }
}

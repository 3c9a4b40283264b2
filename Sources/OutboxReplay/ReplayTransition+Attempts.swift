import OutboxModel
import OutboxQueue

/// The replay layer's transitions: applying an attempt's outcome, failing behind a failed
/// dependency (starting one is the queue's, beside expiry). The replayer persists whatever
/// these return.
extension ReplayTransition {
    /// `lastError` of an operation whose `dependsOn` ended `failed` or `conflict`: it fails too.
    public static let dependencyFailedError = "dependency failed"

    /// `lastError` of an operation held because the upstream refused its credentials with
    /// `status` (SPEC §10).
    public static func authError(_ status: Int) -> String { authErrorPrefix + String(status) }

    /// How long an attempt that could not leave Outbox (`AttemptOutcome.notSent`) waits before
    /// it is tried again: as long as the listener's longest pause when descriptors run out.
    public static let notSentDelaySeconds = 1.0

    /// The state after an attempt with `outcome` ended at `now` (ms since the epoch).
    ///
    /// - completed / conflict: the response is kept, `lastError` is cleared / set to `HTTP 409`.
    /// - failed: `lastError` set, no further attempt.
    /// - retry: while `policy` allows another retry, `retryCount` + 1, back to `pending` with
    ///   `nextAttemptAt` = now + the delay before that retry, where `retryAfter` (seconds, from
    ///   the upstream's `Retry-After`) wins over the backoff; once retries are exhausted,
    ///   `failed` with `lastError` "<error> (retries exhausted)".
    /// - authRequired: back to `pending`, `retryCount` unchanged (the request was not at fault),
    ///   `lastError` `auth: <status>`, and `nextAttemptAt` = now + `maxDelaySeconds`: the lane
    ///   waits, holding its head, until fresh credentials, a retry or flush, or that time.
    /// - credentialsUnavailable: as notSent (nothing left Outbox), but waiting the backoff
    ///   before retry `failures` and saying `credentials: <reason>`.
    /// - notSent: back to `pending`, `retryCount` unchanged and the attempt's number given back
    ///   (`attempts` one lower: nothing was sent, so no retry is spent and the next attempt
    ///   carries the same number), `nextAttemptAt` = now + ``notSentDelaySeconds``.
    public static func nextState(current: OperationState, outcome: AttemptOutcome, now: Int64,
                                 policy: RetryPolicy, retryAfter: Double?,
                                 random: inout some RandomNumberGenerator) -> OperationState {
        var next = current
        next.nextAttemptAt = nil
        switch outcome {
        case .completed(let response):
            next.status = .completed
            next.response = response
            next.conflict = nil
            next.lastError = nil
        case .conflict(let response):
            next.status = .conflict
            next.conflict = response
            next.lastError = "HTTP \(response.status)"
        case .failed(let error):
            next.status = .failed
            next.lastError = error
        case .retry(let error):
            guard policy.allowsRetry(afterRetries: current.retryCount) else {
                next.status = .failed
                next.lastError = "\(error) (retries exhausted)"
                return next
            }
            next.retryCount = current.retryCount + 1
            next.status = .pending
            next.lastError = error
            let delay = retryAfter ?? policy.delay(beforeRetry: next.retryCount, random: &random)
            next.nextAttemptAt = now + WallClock.milliseconds(delay)
        case .authRequired(let status):
            next.status = .pending
            next.lastError = authError(status)
            next.nextAttemptAt = now + WallClock.milliseconds(policy.maxDelaySeconds)
        case .credentialsUnavailable(let reason, let failures):
            next.status = .pending
            next.attempts = max(0, current.attempts - 1)
            next.lastError = credentialsErrorPrefix + reason
            next.nextAttemptAt = now + WallClock.milliseconds(policy.delay(beforeRetry: max(1, failures), random: &random))
        case .notSent(let error):
            next.status = .pending
            next.attempts = max(0, current.attempts - 1)
            next.lastError = error
            next.nextAttemptAt = now + WallClock.milliseconds(notSentDelaySeconds)
        }
        return next
    }

    /// The `failed` state for an unfinished operation whose dependency ended failed or conflict.
    public static func failDependency(current: OperationState) -> OperationState {
        var next = current
        next.status = .failed
        next.nextAttemptAt = nil
        next.lastError = dependencyFailedError
        return next
    }
}

import OutboxModel
import OutboxQueue

/// The replay layer's transitions: applying an attempt's outcome, failing behind a failed
/// dependency (starting one is the queue's, beside expiry). The replayer persists whatever
/// these return.
extension ReplayTransition {
    /// `lastError` of an operation whose `dependsOn` ended `failed` or `conflict`: it fails too.
    public static let dependencyFailedError = "dependency failed"

    /// The state after an attempt with `outcome` ended at `now` (ms since the epoch).
    ///
    /// - completed / conflict: the response is kept, `lastError` is cleared / set to `HTTP 409`.
    /// - failed: `lastError` set, no further attempt.
    /// - retry: while `policy` allows another retry, `retryCount` + 1, back to `pending` with
    ///   `nextAttemptAt` = now + the delay before that retry, where `retryAfter` (seconds, from
    ///   the upstream's `Retry-After`) wins over the backoff; once retries are exhausted,
    ///   `failed` with `lastError` "<error> (retries exhausted)".
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

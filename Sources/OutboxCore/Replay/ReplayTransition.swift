/// The pure state changes of an operation during replay: starting an attempt,
/// applying its outcome, expiring by TTL. The replayer persists whatever these return.
public enum ReplayTransition {
    /// `lastError` of an operation that outlived `queue.ttlSeconds` unfinished: it fails.
    public static let expiredError = "expired"
    /// `lastError` of an operation whose `dependsOn` ended `failed` or `conflict`: it fails too.
    public static let dependencyFailedError = "dependency failed"

    /// The state while an attempt is in flight: `inProgress`, `lastAttemptAt` = `now`, no
    /// pending backoff. The attempt's number (`Outbox-Attempt`) is `retryCount + 1`.
    public static func startAttempt(current: OperationState, now: Int64) -> OperationState {
        var next = current
        next.status = .inProgress
        next.lastAttemptAt = now
        next.nextAttemptAt = nil
        return next
    }

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
            next.nextAttemptAt = now + milliseconds(delay)
        }
        return next
    }

    /// The `failed` ("expired") state for an unfinished operation created at `createdAt` that
    /// is older than `ttlSeconds` at `now`; nil when it is not expired or already finished.
    ///
    /// Only `pending` and `inProgress` expire: `failed` and `conflict` already ended and keep
    /// their own error or conflict data, `completed` is governed by retention instead.
    public static func expire(current: OperationState, createdAt: Int64, now: Int64,
                              ttlSeconds: Double) -> OperationState? {
        guard !current.status.isFinished, now - createdAt > milliseconds(ttlSeconds) else { return nil }
        var next = current
        next.status = .failed
        next.nextAttemptAt = nil
        next.lastError = expiredError
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

    /// Whole milliseconds (rounded up, so a wait is never shortened) for a wait in seconds,
    /// clamped to 0...`RetryAfter.maximumSeconds` so the conversion cannot trap.
    static func milliseconds(_ seconds: Double) -> Int64 {
        guard seconds.isFinite else { return seconds > 0 ? Int64(RetryAfter.maximumSeconds * 1000) : 0 }
        let clamped = min(max(0, seconds), RetryAfter.maximumSeconds)
        return Int64((clamped * 1000).rounded(.up))
    }
}

import OutboxModel

/// The pure state changes of an operation during replay: starting an attempt,
/// applying its outcome, expiring by TTL. The queue starts attempts (it takes an operation and
/// marks it in flight in one step) and applies expiry itself, so those rules live here; the
/// outcome transitions extend this type in the replay layer.
public enum ReplayTransition {
    /// `lastError` of an operation that outlived `queue.ttlSeconds` unfinished: it fails.
    public static let expiredError = "expired"

    /// How `lastError` begins for an operation held because its origin refused its credentials
    /// (`auth: 401`), or because none could be had for it (`credentials: <reason>`) (SPEC §10).
    public static let authErrorPrefix = "auth: "
    public static let credentialsErrorPrefix = "credentials: "

    /// The state while an attempt is in flight: `inProgress`, `lastAttemptAt` = `now`, no
    /// pending backoff, `attempts` = `number`, the attempt's number (`Outbox-Attempt`; by
    /// default one past the attempts `current` counts).
    public static func startAttempt(current: OperationState, now: Int64, number: Int? = nil) -> OperationState {
        var next = current
        next.status = .inProgress
        next.lastAttemptAt = now
        next.nextAttemptAt = nil
        next.attempts = number ?? current.attempts + 1
        return next
    }

    /// The `failed` ("expired") state for an unfinished operation created at `createdAt` that
    /// is older than `ttlSeconds` at `now`; nil when it is not expired or already finished.
    ///
    /// Only `pending` and `inProgress` expire: `failed` and `conflict` already ended and keep
    /// their own error or conflict data, `completed` is governed by retention instead.
    public static func expire(current: OperationState, createdAt: Int64, now: Int64,
                              ttlSeconds: Double) -> OperationState? {
        guard !current.status.isFinished, now - createdAt > WallClock.milliseconds(ttlSeconds) else { return nil }
        var next = current
        next.status = .failed
        next.nextAttemptAt = nil
        next.lastError = expiredError
        return next
    }
}

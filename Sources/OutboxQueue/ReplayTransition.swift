import OutboxModel

/// The pure state changes of an operation during replay: starting an attempt,
/// applying its outcome, expiring by TTL. The queue applies expiry itself, so that rule lives
/// here; the attempt transitions extend this type in the replay layer.
public enum ReplayTransition {
    /// `lastError` of an operation that outlived `queue.ttlSeconds` unfinished: it fails.
    public static let expiredError = "expired"

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

import OutboxModel

/// What one replay attempt means for its operation.
///
/// | upstream answer | outcome |
/// | --- | --- |
/// | 2xx, 3xx | `completed`, the response kept |
/// | status in `authStatuses` (401 by default) | `authRequired`: held for fresh credentials (SPEC §10) |
/// | 409 | `conflict`, the 409 response kept |
/// | status in `retryableStatuses`, or a transport failure | `retry` |
/// | any other status (1xx included: an upstream client never hands one over as final) | `failed` |
/// | none: Outbox had no descriptor for the socket, nothing was sent | `notSent` |
/// | none: Outbox refuses the target (its own listener, or an internal address a wildcard may not reach) | `failed` |
///
/// 409 is checked before `retryableStatuses`, so configuring 409 as retryable has no effect:
/// a conflict needs someone to resolve it, which sending the same request again never does,
/// so it gets its own status.
public enum AttemptOutcome: Sendable, Equatable {
    /// The upstream accepted the request; its response is kept for `completedRetentionSeconds`.
    case completed(StoredResponse)
    /// The upstream answered 409; its response is kept as the operation's conflict data.
    case conflict(StoredResponse)
    /// Try again after backoff; `error` becomes the operation's `lastError` (e.g. `HTTP 503`).
    case retry(error: String)
    /// Permanent failure; `error` becomes the operation's `lastError` (e.g. `HTTP 400`).
    case failed(error: String)
    /// The attempt never left Outbox (no descriptor for its socket, SPEC §6): it spends no
    /// retry and is tried again shortly; `error` becomes the operation's `lastError`.
    case notSent(error: String)
    /// The upstream refused the credentials the attempt carried (a status in
    /// `replay.authStatuses`): the operation is held, pending, its retries unspent, until fresh
    /// credentials come (SPEC §10).
    case authRequired(status: Int)
    /// No credentials could be had for the attempt (`replay.credentials`' command failed):
    /// nothing was sent; it waits, its retries unspent, and is tried again after a backoff
    /// grown by `failures` in a row.
    case credentialsUnavailable(reason: String, failures: Int)

    /// The outcome of an attempt that got a final response from the upstream.
    public init(response: StoredResponse, retryableStatuses: Set<Int>, authStatuses: Set<Int> = []) {
        switch response.status {
        case 200...399: self = .completed(response)
        // Before 409 and the retryable ones: a refused credential is not the request's fault,
        // and no number of retries with it helps.
        case let status where authStatuses.contains(status): self = .authRequired(status: status)
        case 409: self = .conflict(response)
        case let status where retryableStatuses.contains(status): self = .retry(error: "HTTP \(status)")
        default: self = .failed(error: "HTTP \(response.status)")
        }
    }

    /// The outcome of an attempt that got no usable response (connect failure, reset, timeout,
    /// malformed or truncated response): always a retry, since at-least-once delivery with the
    /// same idempotency key makes resending safe.
    public init(transportFailure description: String) {
        self = .retry(error: description)
    }

    /// The outcome of an attempt that failed with `error` before any response: `notSent` when
    /// Outbox itself lacked the descriptor; `failed` when Outbox refuses the target (SPEC §3:
    /// the refusal is a rule about where the target resolves, which no retry changes, so
    /// spending `maxRetries` on it would only hold the lane); else a transport failure (retry
    /// after backoff).
    public init(failure error: UpstreamError) {
        switch error {
        case .localResourcesExhausted: self = .notSent(error: error.summary)
        case .targetRefused: self = .failed(error: error.summary)
        default: self.init(transportFailure: error.summary)
        }
    }
}

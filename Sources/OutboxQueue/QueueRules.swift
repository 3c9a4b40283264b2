import Foundation
import OutboxModel

/// The queue's rules that do not depend on where operations are stored (SPEC §4–§6), stated
/// once for both stores: the local log with its index (`OutboxQueue`) and the shared
/// PostgreSQL store apply these, and the tests run the same behaviour against both. The rest of
/// the rules live where both stores' callers already share them: ordering within a lane in
/// `OperationPriority.laneRank`, attempt outcomes and expiry in `ReplayTransition`, the
/// idempotency decisions in the proxy's `QueueDecision`.
package enum QueueRules {
    /// Whether one more operation may be stored while the queue holds `count` (`maxOperations`,
    /// counted over the whole queue: with PostgreSQL, over every instance's operations).
    package static func refusal(count: Int, maxOperations: Int) -> EnqueueError? {
        count < maxOperations ? nil : .full("queue.maxOperations (\(maxOperations)) reached")
    }

    /// What an operation waiting on `Outbox-Depends-On` does, given its dependency's status
    /// (nil: the dependency is gone, removed or never stored here, and holds nothing back).
    package enum DependencyVerdict: Sendable, Equatable {
        /// It may go when its lane reaches it.
        case ready
        /// It waits, out of its lane's order, until the dependency ends.
        case waiting
        /// The dependency ended `failed` or `conflict`: it fails too
        /// (`ReplayTransition.failDependency`).
        case doomed
    }

    package static func dependency(_ status: OperationStatus?) -> DependencyVerdict {
        switch status {
        case nil, .completed?: .ready
        case .pending?, .inProgress?: .waiting
        case .failed?, .conflict?: .doomed
        }
    }

    /// Whether an admin retry may start `status` over: a finished operation that did not
    /// complete, or a pending one (whose backoff it cuts short). Completed and in-flight ones
    /// cannot be retried.
    package static func isRetryable(_ status: OperationStatus) -> Bool {
        status == .failed || status == .conflict || status == .pending
    }

    /// The state an admin retry gives an operation: a fresh start (pending, due now, the whole
    /// retry budget again, error and stored answers cleared) that keeps its attempt count, so
    /// its next attempt's number is still higher than any sent before.
    package static func retried(attempts: Int) -> OperationState {
        var state = OperationState(status: .pending)
        state.attempts = attempts
        return state
    }

    /// The state a flush gives a pending operation in backoff: due now. Nil when there is no
    /// schedule to clear.
    package static func flushed(_ state: OperationState) -> OperationState? {
        guard state.status == .pending, state.nextAttemptAt != nil else { return nil }
        var due = state
        due.nextAttemptAt = nil
        return due
    }

    /// Whether `state` is held waiting for credentials (SPEC §10): pending, scheduled, and last
    /// refused its credentials or could get none. Fresh credentials for its origin make it due.
    package static func isHeldForCredentials(_ state: OperationState) -> Bool {
        guard state.status == .pending, state.nextAttemptAt != nil, let error = state.lastError else { return false }
        return error.hasPrefix(ReplayTransition.authErrorPrefix) || error.hasPrefix(ReplayTransition.credentialsErrorPrefix)
    }

    /// Completed operations finished before this time (ms since the epoch) are removed
    /// (`completedRetentionSeconds`).
    package static func retentionCutoff(now: Int64, retentionSeconds: Double) -> Int64 {
        now - WallClock.milliseconds(retentionSeconds)
    }

    /// Unfinished operations created before this time fail as `expired` (`ttlSeconds`):
    /// the bound `ReplayTransition.expire` applies to one operation.
    package static func expiryCutoff(now: Int64, ttlSeconds: Double) -> Int64 {
        now - WallClock.milliseconds(ttlSeconds)
    }
}

/// The name an instance goes by in `/admin/status` and in operations' `instance` (SPEC §9):
/// `queue.postgres.instanceName`, else `host:pid` (the form Sidekiq's process identities take).
package enum InstanceName {
    package static func resolve(configured: String?) -> String {
        if let configured { return configured }
        var buffer = [CChar](repeating: 0, count: 256)
        let host = gethostname(&buffer, buffer.count) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "localhost"
        return "\(host):\(getpid())"
    }
}

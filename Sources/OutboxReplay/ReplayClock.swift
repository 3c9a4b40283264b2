import Foundation

/// The time source of the replayer: wall-clock milliseconds (the unit of `createdAt`,
/// `nextAttemptAt`) and a way to wait for a deadline. Injected so that tests drive backoff
/// with `ManualReplayClock` instead of sleeping through it.
public protocol ReplayClock: Sendable {
    /// Now, in milliseconds since 1970-01-01T00:00:00Z.
    var nowMilliseconds: Int64 { get }

    /// Returns once `nowMilliseconds` has reached `deadline` (at once if it already has).
    /// Throws `CancellationError` when the calling task is cancelled first.
    func sleep(until deadline: Int64) async throws

    /// `sleep(until:)` for the deadline of an attempt in flight rather than a wait of the
    /// replayer's own (a backoff, a parked loop): a test clock keeps the two apart, so a test
    /// counting the replayer's waits does not count the deadline of each send.
    func sleep(untilAttemptDeadline deadline: Int64) async throws
}

extension ReplayClock {
    /// A clock that tells no sleeps apart sleeps as for any other.
    public func sleep(untilAttemptDeadline deadline: Int64) async throws {
        try await sleep(until: deadline)
    }
}

/// The real clock: system wall time and `Task.sleep`.
public struct SystemReplayClock: ReplayClock {
    /// A clock reading the system's wall time.
    public init() {}

    /// Now, in milliseconds since the epoch.
    public var nowMilliseconds: Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// Sleeps until `deadline`. A wall-clock jump while asleep is not followed (the wait is
    /// measured once); the replayer re-reads `nowMilliseconds` after waking anyway.
    public func sleep(until deadline: Int64) async throws {
        let remaining = deadline - nowMilliseconds
        guard remaining > 0 else {
            try Task.checkCancellation()
            return
        }
        try await Task.sleep(nanoseconds: UInt64(remaining) * 1_000_000)
    }
}

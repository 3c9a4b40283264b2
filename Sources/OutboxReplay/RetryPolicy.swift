import Foundation
import OutboxConfig

/// Replay backoff: how many retries an operation gets and how long to wait before
/// each one.
///
/// Built from `OutboxConfig.Retry`, whose preset the config has already applied. The delay
/// before retry n (n = 1, 2, …) is `baseDelaySeconds × multiplier^(n−1)`, capped at
/// `maxDelaySeconds`, then, when `jitter` is on, spread uniformly over 50 %–150 % of that
/// nominal value (the cap bounds the nominal delay, so a jittered one can exceed it by half).
public struct RetryPolicy: Sendable, Equatable {
    /// Retries after the first attempt: an operation is attempted at most `1 + maxRetries` times.
    public var maxRetries: Int
    /// Nominal delay before the first retry, in seconds.
    public var baseDelaySeconds: Double
    /// Growth factor per retry.
    public var multiplier: Double
    /// Cap on the nominal delay, in seconds.
    public var maxDelaySeconds: Double
    /// Spread each delay over 50 %–150 % of its nominal value.
    public var jitter: Bool
    /// Upstream statuses that are retried rather than failing the operation.
    public var retryableStatuses: Set<Int>

    /// The policy a config's `retry` section describes.
    public init(_ retry: OutboxConfig.Retry) {
        self.init(maxRetries: retry.maxRetries, baseDelaySeconds: retry.baseDelaySeconds,
                  multiplier: retry.multiplier, maxDelaySeconds: retry.maxDelaySeconds,
                  jitter: retry.jitter, retryableStatuses: Set(retry.retryableStatuses))
    }

    /// A policy from explicit values; negative counts and delays are treated as zero.
    public init(maxRetries: Int, baseDelaySeconds: Double, multiplier: Double, maxDelaySeconds: Double,
                jitter: Bool, retryableStatuses: Set<Int> = [408, 425, 429, 500, 502, 503, 504]) {
        self.maxRetries = max(0, maxRetries)
        self.baseDelaySeconds = max(0, baseDelaySeconds)
        self.multiplier = multiplier
        self.maxDelaySeconds = max(0, maxDelaySeconds)
        self.jitter = jitter
        self.retryableStatuses = retryableStatuses
    }

    /// The un-jittered delay before retry `n` (1-based; values below 1 count as 1), in seconds.
    public func nominalDelay(beforeRetry n: Int) -> Double {
        let exponent = Double(max(1, n) - 1)
        // pow may overflow to +infinity for large n; min() then yields the cap, never a trap.
        let raw = baseDelaySeconds * pow(multiplier, exponent)
        guard raw.isFinite else { return maxDelaySeconds }
        return min(raw, maxDelaySeconds)
    }

    /// The delay before retry `n` (1-based), in seconds: the nominal delay, jittered to
    /// 50 %–150 % with `random` when `jitter` is on.
    public func delay(beforeRetry n: Int, random: inout some RandomNumberGenerator) -> Double {
        let nominal = nominalDelay(beforeRetry: n)
        guard jitter, nominal > 0 else { return nominal }
        return nominal * Double.random(in: 0.5...1.5, using: &random)
    }

    /// True when an operation that has already been retried `retryCount` times may be retried
    /// once more.
    public func allowsRetry(afterRetries retryCount: Int) -> Bool {
        retryCount < maxRetries
    }
}

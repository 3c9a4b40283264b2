/// A point in time after which a blocking harness operation gives up, so that no test can hang
/// however the proxy misbehaves.
struct Deadline: Sendable {
    let instant: ContinuousClock.Instant

    /// A deadline `duration` from now.
    init(after duration: Duration) {
        instant = .now + duration
    }

    /// Whether the deadline is already behind us.
    var hasPassed: Bool { ContinuousClock.now >= instant }

    /// Time left, clamped at zero.
    var remaining: Duration {
        let left = instant - ContinuousClock.now
        return left > .zero ? left : .zero
    }

    /// Time left in whole milliseconds for poll(2), rounded up so a pending deadline never
    /// turns into a busy loop of zero-timeout polls.
    var pollMilliseconds: Int32 {
        let (seconds, attoseconds) = remaining.components
        let millis = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: millis)
    }
}

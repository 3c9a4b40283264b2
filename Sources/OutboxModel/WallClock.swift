import Glibc

/// Wall-clock time for what users read (queuedAt, createdAt): milliseconds since the epoch and
/// RFC 3339 text. Deadlines use the monotonic clock instead. The logger's clock and
/// timestamp format serve here too, so every time Outbox prints reads the same way.
package enum WallClock {
    package static func millis() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// `2026-11-29T15:04:05Z` (UTC, whole seconds, like `queuedAt`): the log timestamp
    /// without its milliseconds.
    package static func iso8601(millis: Int64) -> String {
        String(timestamp(milliseconds: millis).dropLast(5)) + "Z"
    }
}

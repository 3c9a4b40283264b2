import Glibc

/// Wall-clock time for what users read (queuedAt, createdAt): milliseconds since the epoch and
/// RFC 3339 text. Deadlines use the monotonic clock instead.
enum WallClock {
    static func millis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// `2026-11-29T15:04:05Z` (UTC, whole seconds, as in SPEC §4's example).
    static func iso8601(millis: Int64) -> String {
        var seconds = time_t(millis / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : String(value) }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}

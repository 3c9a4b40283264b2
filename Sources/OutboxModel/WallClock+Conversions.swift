import Glibc

/// The wall clock's conversions: seconds of waiting to milliseconds, and the RFC 3339 text the
/// logger and the API print.
extension WallClock {
    /// Longest wait accepted, in seconds (about 100 years): larger values are clamped so that
    /// converting to milliseconds can never overflow.
    package static let maximumWaitSeconds: Double = 3_153_600_000

    /// Whole milliseconds (rounded up, so a wait is never shortened) for a wait in seconds,
    /// clamped to 0...`maximumWaitSeconds` so the conversion cannot trap.
    package static func milliseconds(_ seconds: Double) -> Int64 {
        guard seconds.isFinite else { return seconds > 0 ? Int64(maximumWaitSeconds * 1000) : 0 }
        let clamped = min(max(0, seconds), maximumWaitSeconds)
        return Int64((clamped * 1000).rounded(.up))
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` in UTC (RFC 3339), milliseconds truncated.
    package static func timestamp(milliseconds: Int64) -> String {
        // Floor division, so instants before 1970 still get a millisecond part in 0...999.
        var seconds = milliseconds / 1000
        var millis = milliseconds % 1000
        if millis < 0 {
            seconds -= 1
            millis += 1000
        }
        var time = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return "0000-00-00T00:00:00.000Z" }
        return "\(padded(Int(parts.tm_year) + 1900, 4))-\(padded(Int(parts.tm_mon) + 1, 2))-\(padded(Int(parts.tm_mday), 2))"
            + "T\(padded(Int(parts.tm_hour), 2)):\(padded(Int(parts.tm_min), 2)):\(padded(Int(parts.tm_sec), 2))"
            + ".\(padded(Int(millis), 3))Z"
    }

    private static func padded(_ number: Int, _ width: Int) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}

/// Wall-clock time for what users read (queuedAt, createdAt): milliseconds since the epoch and
/// RFC 3339 text. Deadlines use the monotonic clock instead. The logger's clock and
/// timestamp format serve here too, so every time Outbox prints reads the same way.
enum WallClock {
    static func millis() -> Int64 {
        Logger.systemMilliseconds()
    }

    /// `2026-11-29T15:04:05Z` (UTC, whole seconds, like `queuedAt`): the log timestamp
    /// without its milliseconds.
    static func iso8601(millis: Int64) -> String {
        String(Logger.timestamp(milliseconds: millis).dropLast(5)) + "Z"
    }
}

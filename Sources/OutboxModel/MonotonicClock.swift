import Glibc

/// Monotonic time in nanoseconds, for deadlines and durations: never the wall clock, which
/// may jump. One reading for every layer (the event loops' timers, the log's group-commit
/// counters), so their times compare.
package enum MonotonicClock {
    package static func nanos() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}

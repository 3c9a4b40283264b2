/// When the listeners may accept again after the process ran out of descriptors: the pure
/// schedule behind the accept pause (SPEC §6), driven by monotonic nanoseconds.
///
/// A listening socket whose `accept4` fails with `EMFILE` (or `ENFILE`, `ENOBUFS`, `ENOMEM`)
/// keeps its connection queued and stays readable: on a level-triggered epoll, accepting again
/// at once is a loop at 100 % CPU that serves nobody. So the listeners stop for a pause (nginx
/// disables its accept events for a moment in the same spot): 100 ms, doubled each time the
/// shortage is still there when it ends, at most 1 s. An *episode* runs from the first failure
/// to the next connection accepted; it is logged once at its start and once at its end,
/// however many pauses it took.
package struct AcceptBackoff: Sendable, Equatable {
    /// The first pause of an episode.
    package static let firstPause: UInt64 = 100_000_000
    /// The longest pause: a connection waits at most this long after descriptors are free.
    package static let longestPause: UInt64 = 1_000_000_000

    /// When the current episode began; nil while accepting works.
    package private(set) var episodeStartedAt: UInt64?
    /// Until when the listeners are paused; nil while they accept.
    package private(set) var pausedUntil: UInt64?
    /// The pause the next shortage of this episode gets.
    private var nextPause = AcceptBackoff.firstPause

    package init() {}

    /// What a shortage means for the listeners.
    package struct Pause: Sendable, Equatable {
        /// Stop accepting until then.
        package var until: UInt64
        /// The first shortage of an episode: the one moment worth a log line.
        package var startsEpisode: Bool
    }

    /// An accept failed for lack of descriptors at `now`: stop accepting until the pause's end.
    package mutating func exhausted(now: UInt64) -> Pause {
        let startsEpisode = episodeStartedAt == nil
        if startsEpisode { episodeStartedAt = now }
        let pause = nextPause
        nextPause = min(pause * 2, Self.longestPause)
        pausedUntil = now + pause
        return Pause(until: now + pause, startsEpisode: startsEpisode)
    }

    /// Whether the pause is over at `now`, so the listeners are to accept again (once: the
    /// pause is cleared). The episode goes on until a connection is accepted.
    package mutating func resumes(now: UInt64) -> Bool {
        guard let until = pausedUntil, now >= until else { return false }
        pausedUntil = nil
        return true
    }

    /// A connection was accepted at `now`: the episode, if one ran, is over. Returns how long
    /// it lasted (ns), for the line that says so; nil when there was none.
    package mutating func accepted(now: UInt64) -> UInt64? {
        guard let started = episodeStartedAt else { return nil }
        episodeStartedAt = nil
        pausedUntil = nil
        nextPause = Self.firstPause
        return now >= started ? now - started : 0
    }
}

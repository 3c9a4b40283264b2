@testable import OutboxNet
import Testing

/// The schedule of the listeners' pause when descriptors run out (SPEC §6), driven by a
/// manual monotonic clock: 100 ms, doubling, at most 1 s; one episode from the first shortage
/// to the next accepted connection.
@Suite("Accept back-off when descriptors run out")
struct AcceptBackoffTests {
    private static let ms: UInt64 = 1_000_000

    @Test func pausesGrowFrom100MillisecondsTo1Second_WhileTheShortagePersists() {
        var backoff = AcceptBackoff()
        var now: UInt64 = 5_000 * Self.ms
        var pauses: [UInt64] = []
        var starts: [Bool] = []
        for _ in 0..<7 {
            let pause = backoff.exhausted(now: now)
            pauses.append((pause.until - now) / Self.ms)
            starts.append(pause.startsEpisode)
            let early = backoff.resumes(now: pause.until - 1)
            #expect(!early, "resumed before the pause ended")
            now = pause.until
            let due = backoff.resumes(now: now)
            let again = backoff.resumes(now: now)
            #expect(due)
            #expect(!again, "a pause resumes the listeners once")
        }
        #expect(pauses == [100, 200, 400, 800, 1000, 1000, 1000])
        #expect(starts == [true, false, false, false, false, false, false], "one log line per episode")
    }

    @Test func anAcceptedConnectionEndsTheEpisode_AndTheNextShortageStartsAnewAt100Milliseconds() {
        var backoff = AcceptBackoff()
        let nothing = backoff.accepted(now: 1)
        #expect(nothing == nil, "no episode, nothing to report")
        let start: UInt64 = 1_000 * Self.ms
        _ = backoff.exhausted(now: start)
        let second = backoff.exhausted(now: start + 100 * Self.ms)
        #expect(second.until == start + 300 * Self.ms)
        // The pause ended and the listeners found nothing pending: still the same episode.
        let resumed = backoff.resumes(now: second.until)
        #expect(resumed)
        #expect(backoff.episodeStartedAt == start)
        let lasted = backoff.accepted(now: start + 750 * Self.ms)
        #expect(lasted == 750 * Self.ms)
        #expect(backoff.episodeStartedAt == nil)
        #expect(backoff.pausedUntil == nil)
        let reportedAgain = backoff.accepted(now: start + 800 * Self.ms)
        #expect(reportedAgain == nil, "the end is reported once")
        let next = backoff.exhausted(now: start + 900 * Self.ms)
        #expect(next.startsEpisode)
        #expect(next.until == start + 1_000 * Self.ms)
    }
}

import Foundation
import Glibc
import Testing

/// A restart does not reset or spend an operation's backoff: the schedule written with each
/// failed attempt is what the restarted process follows and shows, and a schedule that passed
/// while nobody could act on it is shown as due now, never as a time in the past.
@Suite("Queue: backoff across restarts", .harnessThreads)
struct QueueRestartBackoffTests {
    /// How the first process ends.
    enum Stop: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case sigterm
        case sigkill

        var signal: Int32 { self == .sigterm ? SIGTERM : SIGKILL }
        var testDescription: String { rawValue }
    }

    @Test(arguments: Stop.allCases)
    func waitingOperationKeepsItsScheduleAndRetryCountAcrossARestart(stop: Stop) async throws {
        // The stored write is refused with 503 every time; writes sent after the restart succeed.
        let upstream = try TestUpstream { request in
            request.bodyText == "backing-off" ? .respond(.text("down", status: 503)) : .respond(.text("ok", status: 201))
        }
        // One minute before the first retry: far longer than anything this test waits for.
        let setup = try Setup(upstream, retry: #""maxRetries": 5, "baseDelaySeconds": 60, "maxDelaySeconds": 60, "jitter": false"#)
        let first = try await setup.start()
        let queued = try first.enqueue(body: "backing-off", headers: [HeaderField("Outbox-Mode", "queue")])
        _ = try await upstream.waitForRequests(1)
        let before = try await first.waitForOperation(queued.id, describedAs: "retryCount 1") { $0.int("retryCount") == 1 }
        let scheduled = try #require(before.string("nextAttemptAt"), "no nextAttemptAt after a 503: \(before)")
        // A write queued behind it on the same origin: its 202 means its record is on disk, and
        // the log is written in order, so the backing-off state appended before it is too.
        _ = try first.enqueue(body: "behind")

        first.terminate(signal: stop.signal)
        _ = try await first.waitForExit()
        let restartedAt = Date()
        let second = try await setup.start()

        let after = try second.operation(queued.id)
        #expect(after.string("status") == "pending", "\(after)")
        #expect(after.int("retryCount") == 1, "the restart changed retryCount: \(after)")
        #expect(after.string("nextAttemptAt") == scheduled, "scheduled \(scheduled) before the restart, now: \(after)")
        let shown = try #require(after.string("nextAttemptAt").flatMap(Self.date), "\(after)")
        #expect(shown >= restartedAt.addingTimeInterval(-1), "nextAttemptAt \(shown) is before the restart at \(restartedAt)")

        // A critical write does not overtake it either (SPEC §4: an attempted operation stays
        // its lane's head until it ends). A write in another lane is delivered meanwhile: once
        // it is, the origin's replay has had its chance to send the lane's two and must not have.
        let urgent = try second.enqueue(body: "urgent", headers: [HeaderField("Outbox-Priority", "critical")])
        let aside = try second.enqueue(body: "aside", headers: [HeaderField("Outbox-Ordering-Key", "aside"),
                                                               HeaderField("Outbox-Mode", "queue")])
        let delivered = try await second.waitForOperation(aside.id, toBe: ["completed", "failed", "conflict"])
        #expect(delivered.string("status") == "completed", "\(delivered)")
        let waiting = try second.operation(queued.id)
        #expect(waiting.string("status") == "pending" && waiting.int("retryCount") == 1, "\(waiting)")
        #expect(try second.operation(urgent.id).string("status") == "pending")
        #expect(upstream.requests.map(\.bodyText) == ["backing-off", "aside"],
                "upstream got \(upstream.requests.map { "\($0.bodyText) #\($0.attempt ?? 0)" })\n\(second)")
    }

    @Test func aRestartDuringAnOutageProbesFirstAndSpendsNoRetry_AndShowsAMissedScheduleAsDueNow() async throws {
        // 503 until the test lets the upstream accept the write.
        let accepting = Gate()
        let upstream = try Self.upstream(acceptingOnceOpen: accepting)
        let setup = try Setup(upstream, retry: #""maxRetries": 100, "baseDelaySeconds": 0.2, "multiplier": 1, "jitter": false"#)
        let first = try await setup.start()
        let queued = try first.enqueue(body: "outage", headers: [HeaderField("Outbox-Mode", "queue")])
        _ = try await first.waitForOperation(queued.id, describedAs: "retried") { ($0.int("retryCount") ?? 0) >= 1 }
        // Offline replays nothing more, so the operation settles waiting with a schedule (an
        // attempt in flight at the signal would come back as never scheduled instead).
        try Self.switchOffline(first)
        _ = try await first.waitForOperation(queued.id, describedAs: "waiting with a schedule") {
            $0.string("status") == "pending" && $0.string("nextAttemptAt") != nil
        }
        first.terminate(signal: SIGTERM)
        _ = try await first.waitForExit()
        // The outage: while Outbox is down the upstream goes away entirely.
        upstream.stop()
        let second = try await setup.start()
        let atRestart = try second.operation(queued.id)
        let retries = try #require(atRestart.int("retryCount"), "\(atRestart)")

        // Its schedule passes while the process is down. The restart probes the origin before
        // any attempt: the probe is refused, the origin goes offline, and no retry is spent.
        let offline = try await second.waitForOriginStatus(upstream.baseURL) { $0.bool("online") == false }
        #expect(offline.string("lastError") != nil, "\(offline)")
        let scheduled = try #require(try second.operation(queued.id).string("nextAttemptAt").flatMap(Self.date))
        // The behaviour is about a time that has passed: wait (bounded) until the schedule is
        // more than a second old, so the second-resolution timestamp would show it.
        let overdue = scheduled.addingTimeInterval(1.5)
        while Date() < overdue { try await Task.sleep(for: .milliseconds(50)) }

        let askedAt = Date()
        let shown = try second.operation(queued.id)
        #expect(shown.string("status") == "pending", "\(shown)")
        #expect(shown.int("retryCount") == retries, "a retry was spent against the offline origin: \(shown)")
        let next = try #require(shown.string("nextAttemptAt").flatMap(Self.date), "a waiting operation without nextAttemptAt: \(shown)")
        #expect(next >= askedAt.addingTimeInterval(-1), "nextAttemptAt \(next) is in the past at \(askedAt): \(shown)")
        #expect(next < askedAt.addingTimeInterval(5), "nextAttemptAt \(next) is not due now at \(askedAt): \(shown)")

        // Back again: a probe finds the origin, the lane starts, and the next attempt is the
        // one after the last attempt before the restart.
        accepting.open()
        try upstream.restart()
        let done = try await second.waitForOperation(queued.id, toBe: ["completed", "failed", "conflict"], timeout: .seconds(30))
        #expect(done.string("status") == "completed", "\(done)")
        #expect(upstream.requests.last?.attempt == retries + 1,
                "attempts: \(upstream.requests.map { $0.attempt ?? 0 }); retries before the restart: \(retries)")
    }

    /// A flush clears the backoff for good: its `202` comes once the cleared schedule is stored,
    /// so a process stopped right after it (even by `kill -9`) restarts with the operation due
    /// now, not an hour later.
    @Test(arguments: Stop.allCases)
    func aFlushedScheduleStaysClearedAcrossARestart(stop: Stop) async throws {
        let accepting = Gate()
        let upstream = try Self.upstream(acceptingOnceOpen: accepting)
        let setup = try Setup(upstream, retry: #""maxRetries": 5, "baseDelaySeconds": 3600, "maxDelaySeconds": 3600, "jitter": false"#)
        let first = try await setup.start()
        let queued = try first.enqueue(body: "flushed", headers: [HeaderField("Outbox-Mode", "queue")])
        let backingOff = try await first.waitForOperation(queued.id, describedAs: "an hour's backoff") {
            $0.string("status") == "pending" && $0.int("retryCount") == 1 && $0.string("nextAttemptAt") != nil
        }
        // Offline, so the flush itself sends nothing: the cleared schedule is all it changes.
        try Self.switchOffline(first)
        #expect(try first.send("POST", "/admin/flush").status == 202)
        let flushed = try first.operation(queued.id)
        #expect(flushed.string("nextAttemptAt") != backingOff.string("nextAttemptAt"), "\(flushed)")
        first.terminate(signal: stop.signal)
        _ = try await first.waitForExit()

        accepting.open()
        let second = try await setup.start()
        let done = try await second.waitForOperation(queued.id, toBe: ["completed", "failed", "conflict"], timeout: .seconds(30))
        #expect(done.string("status") == "completed", "\(done)")
        #expect(done.int("retryCount") == 1, "\(done)")
        #expect(upstream.requests.map(\.bodyText) == ["flushed", "flushed"], "\(second)")
    }

    /// An upstream that answers 503 until `gate` opens, 201 after.
    static func upstream(acceptingOnceOpen gate: Gate) throws -> TestUpstream {
        try TestUpstream { _ in gate.isOpen ? .respond(.text("created", status: 201)) : .respond(.text("down", status: 503)) }
    }

    /// `PUT /admin/connectivity {"mode":"offline"}`: replay nothing more.
    static func switchOffline(_ outbox: OutboxProcess, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let off = try outbox.send("PUT", "/admin/connectivity", body: #"{"mode":"offline"}"#,
                                  headers: [HeaderField("Content-Type", "application/json")])
        #expect(off.status == 200, "\(off)", sourceLocation: sourceLocation)
    }

    /// The data directory and config that the process before and the one after the restart share.
    struct Setup {
        let home: TemporaryDirectory
        let upstream: String
        let config: String

        /// `retry`: the members of the config's `retry` object, as JSON text.
        init(_ upstream: TestUpstream, retry: String) throws {
            home = try TemporaryDirectory()
            self.upstream = upstream.baseURL
            config = OutboxProcess.fastQueueConfig(retry: retry)
        }

        func start() async throws -> OutboxProcess {
            try await OutboxProcess.start(upstream: upstream, config: config, dataDirectory: home.file("data"))
        }
    }

    /// `2026-12-01T07:19:45Z` as the admin API writes it.
    static func date(_ text: String) -> Date? {
        ISO8601DateFormatter().date(from: text)
    }
}

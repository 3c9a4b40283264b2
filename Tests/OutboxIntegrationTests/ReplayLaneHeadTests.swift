import Foundation
import Glibc
import Testing

/// Priority orders only what was not attempted (SPEC §4): once an operation has been attempted
/// it stays its lane's head until it ends, so a `critical` write arriving while the head backs
/// off waits behind it, also across a restart.
@Suite("Replay: an attempted operation stays its lane's head", .harnessThreads)
struct ReplayLaneHeadTests {
    /// `head` fails its first attempt with a 500 (retryable, and the origin stays online);
    /// everything else is accepted.
    static func upstream() throws -> TestUpstream {
        try TestUpstream { request in
            request.bodyText == "head" && request.attempt == 1 ? .respond(.text("oops", status: 500))
                : .respond(.text("created", status: 201))
        }
    }

    /// A backoff long enough to queue the critical write during it, short enough to wait out.
    static let retry = #""maxRetries": 3, "baseDelaySeconds": 1, "multiplier": 1, "jitter": false"#

    @Test func aCriticalWriteArrivingWhileTheHeadBacksOffIsSentAfterIt() async throws {
        let upstream = try Self.upstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(retry: Self.retry))
        let head = try outbox.enqueue(body: "head", headers: [HeaderField("Outbox-Mode", "queue")])
        _ = try await outbox.waitForOperation(head.id, describedAs: "backing off") {
            $0.string("status") == "pending" && $0.int("retryCount") == 1
        }
        let urgent = try outbox.enqueue(body: "urgent", headers: [HeaderField("Outbox-Priority", "critical")])
        try outbox.drain()
        #expect(upstream.requests.map { "\($0.bodyText)#\($0.attempt ?? 0)" } == ["head#1", "head#2", "urgent#1"])
        #expect(try outbox.operation(urgent.id).string("status") == "completed")
    }

    @Test func afterAKillTheAttemptedHeadStillGoesBeforeACriticalWrite() async throws {
        let upstream = try Self.upstream()
        let home = try TemporaryDirectory()
        let config = OutboxProcess.fastQueueConfig(retry: Self.retry)
        let first = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: home.file("data"))
        let head = try first.enqueue(body: "head", headers: [HeaderField("Outbox-Mode", "queue")])
        _ = try await first.waitForOperation(head.id, describedAs: "backing off") {
            $0.string("status") == "pending" && $0.int("retryCount") == 1
        }
        // Its 202 means its record is on disk, and records reach the disk in order: whatever the
        // head's attempt wrote before it is there too.
        let urgent = try first.enqueue(body: "urgent", headers: [HeaderField("Outbox-Priority", "critical")])
        first.terminate(signal: SIGKILL)
        _ = try await first.waitForExit()

        let second = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: home.file("data"))
        try second.drain()
        let order = upstream.requests.map(\.bodyText)
        let described = upstream.requests.map { "\($0.bodyText)#\($0.attempt ?? 0)" }
        // Every send of the head, before the kill and after, comes before the critical write's.
        let lastHead = try #require(order.lastIndex(of: "head"), "\(described)")
        let firstUrgent = try #require(order.firstIndex(of: "urgent"), "\(described)")
        #expect(lastHead < firstUrgent, "the critical write overtook the attempted head: \(described)")
        #expect(order.filter { $0 == "head" }.count >= 2, "\(described)")
        #expect(try second.operation(urgent.id).string("status") == "completed")
        #expect(try second.operation(head.id).string("status") == "completed")
    }
}

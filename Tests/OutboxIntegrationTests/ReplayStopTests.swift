import Foundation
import Glibc
import Testing

/// How replay ends with the process (SPEC §4): a clean stop lets the attempts in flight finish
/// and records their outcomes, so it sends nothing twice; after a `kill -9` the operation that
/// was in flight is sent again with a higher `Outbox-Attempt`, so the upstream can tell the
/// redelivery from a first try.
@Suite("Replay: stopping and crashing", .harnessThreads)
struct ReplayStopTests {
    /// `Outbox-Attempt` of each request, by idempotency key, in arrival order.
    static func attemptsByKey(_ requests: [RecordedRequest]) -> [String: [Int]] {
        Dictionary(grouping: requests, by: { $0.idempotencyKey ?? "-" }).mapValues { $0.map { $0.attempt ?? 0 } }
    }

    @Test(arguments: TestStore.both)
    func aSIGTERMDuringReplayLetsTheAttemptInFlightFinish_SoARestartSendsNothingTwice(store: TestStore) async throws {
        let released = Gate()
        // The first write is answered only once the test has sent the signal.
        let upstream = try TestUpstream { request in
            request.bodyText == "op-0" ? .hold(until: released, then: .respond(.text("created", status: 201)))
                : .respond(.text("created", status: 201))
        }
        upstream.stop()
        let home = try TemporaryDirectory()
        let config = OutboxProcess.fastQueueConfig()
        let first = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: home.file("data"),
                                                   store: store)
        let operations = try (0..<8).map { try first.enqueue(body: "op-\($0)") }
        try upstream.restart()
        _ = try await upstream.waitForRequests(1)

        first.terminate(signal: SIGTERM)
        try await first.waitForLog(containing: "stopping", timeout: .seconds(5))
        released.open()
        #expect(try await first.waitForExit(timeout: .seconds(20)) == .exited(0), "\(first)")

        let second = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: home.file("data"),
                                                   store: store)
        try second.drain()
        let bodies = upstream.requests.map(\.bodyText)
        #expect(bodies == operations.indices.map { "op-\($0)" }, "each operation once, in order: \(bodies)")
        #expect(upstream.requests.allSatisfy { $0.attempt == 1 },
                "\(upstream.requests.map { "\($0.bodyText)#\($0.attempt ?? 0)" })")
        for operation in operations {
            #expect(try second.operation(operation.id).string("status") == "completed")
        }
    }

    /// On the postgres store the restarted instance is another holder: it takes the lane over
    /// once the killed one's claim lapsed, counting the attempt the lane's mark covers.
    @Test(arguments: TestStore.both(leaseSeconds: 2))
    func afterAKillDuringAnAttemptTheResendCarriesAHigherAttemptNumber(store: TestStore) async throws {
        // The first request is held until its connection goes (with the killed process).
        let upstream = try TestUpstream { request in
            request.index == 0 ? .holdUntilPeerCloses : .respond(.text("created", status: 201))
        }
        upstream.stop()
        let home = try TemporaryDirectory()
        let config = OutboxProcess.fastQueueConfig()
        let first = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: home.file("data"),
                                                   store: store)
        let inFlight = try first.enqueue(body: "in-flight")
        for n in 0..<3 { _ = try first.enqueue(body: "behind-\(n)") }
        try upstream.restart()
        let held = try #require(try await upstream.waitForRequests(1).first)
        #expect(held.attempt == 1 && held.bodyText == "in-flight", "\(held.headers)")

        first.terminate(signal: SIGKILL)
        _ = try await first.waitForExit()
        let second = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: home.file("data"),
                                                   store: store)
        try second.drain()
        let attempts = Self.attemptsByKey(upstream.requests)
        let resent = try #require(attempts[inFlight.idempotencyKey], "\(attempts)")
        #expect(resent.count == 2 && resent[1] >= 2, "the redelivery repeated the number of the attempt before it: \(resent)")
        // Every key's numbers only go up.
        for (key, numbers) in attempts {
            #expect(zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 }, "\(key): \(numbers)")
        }
        #expect(try second.operation(inFlight.id).string("status") == "completed")
    }
}

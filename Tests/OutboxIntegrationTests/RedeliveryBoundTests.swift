import Foundation
import Glibc
import Testing

/// The redelivery after `kill -9` is bounded: the real binary, replaying a long queue into an
/// upstream that flaps, is killed again and again; after each restart at most the operation in
/// flight plus 32 whose outcome was not yet on disk are delivered a second time (one lane: no
/// ordering keys), and in the end every operation is delivered.
///
/// The bound is an upper one, so this can only catch a lane that runs too far ahead of the disk
/// when the disk does fall behind; how far depends on the machine. Checked by hand with the
/// window disabled, on two busy cores, four runs: 43 sent again at one kill in one, at most 23
/// in the others (with the window: at most 8 in four). "Replayer: bounded redelivery" catches a
/// missing window every time.
@Suite("Redelivery after kill -9", .harnessThreads)
struct RedeliveryBoundTests {
    /// Operations queued before the first replay: more than the runs below deliver, so every
    /// kill falls in the middle of the replay.
    static let operations = 500
    static let kills = 10
    /// Each run is killed once the upstream has received this many more requests: well past
    /// the bound, so a lane running ahead of the disk would show.
    static let requestsPerRun = 45
    /// The operation in flight plus the outcomes not yet on disk.
    static let bound = 1 + 32

    /// A response body the completed state keeps: each outcome is this much for the log to
    /// write, so the disk can fall behind deliveries on loopback as it does at real latency.
    static let stored = [UInt8](repeating: UInt8(ascii: "s"), count: 16 << 10)

    /// The flapping upstream, by request number (never by time): mostly `201`, now and then a
    /// `503` (the origin goes offline, the operation is retried) or a connection dropped before
    /// any answer.
    static func action(forRequest index: Int) -> UpstreamAction {
        switch index % 89 {
        case 44: .respond(.text("busy", status: 503))
        case 88: .closeWithoutAnswer
        default: .respond(UpstreamResponse(status: 201, body: .bytes(stored)))
        }
    }

    static func delivered(_ index: Int) -> Bool {
        if case .respond(let response) = action(forRequest: index) { return response.status < 300 }
        return false
    }

    @Test func eachKillSendsAtMostTheInFlightOperationPlus32AgainPerLane_AndNothingIsLost() async throws {
        let upstream = try TestUpstream { request in Self.action(forRequest: request.index) }
        upstream.stop()
        let home = try TemporaryDirectory()
        let data = home.file("data")
        // Retries are plentiful: a flap must never fail an operation, or "nothing lost" would
        // depend on where the kills fall.
        let config = OutboxProcess.fastQueueConfig(retry: #""preset": "immediate", "maxRetries": 1000"#)
        var outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data)

        let writers = 4
        let ledger = WaitableState(DurabilityTests.Ledger())
        DurabilityTests.startWriters(count: writers, limit: Self.operations, port: outbox.port, ledger: ledger)
        let queued = try await ledger.wait(
            timeout: .seconds(60),
            describeTimeout: { "\($0.acknowledged.count) of \(Self.operations) acknowledged; unexpected: \($0.unexpected.prefix(3))" },
            until: { $0.finishedWriters == writers ? $0 : nil })
        try #require(queued.acknowledged.count == Self.operations && queued.unexpected.isEmpty,
                     "\(queued.acknowledged.count) acknowledged; unexpected: \(queued.unexpected.prefix(3))\n\(outbox)")

        // Connections of run k are those the upstream accepted from runStarts[k] on. Each run's
        // connections are counted once its process is dead and the upstream's listener is
        // closed, so no connection of a killed process is taken for one of the next.
        var runStarts = [upstream.acceptedConnectionCount]
        try upstream.restart()
        for kill in 0..<Self.kills {
            try await upstream.waitForRequests(upstream.requests.count + Self.requestsPerRun, timeout: .seconds(30))
            outbox.terminate(signal: SIGKILL)
            let exit = try await outbox.waitForExit()
            try #require(exit == .signaled(SIGKILL), "run \(kill) ended with \(exit)\n\(outbox)")
            upstream.stop()
            runStarts.append(upstream.acceptedConnectionCount)
            try upstream.restart()
            outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data)
        }
        try outbox.drain(timeoutSeconds: 60)
        let status = try JSONObject(outbox.admin("status"))

        let requests = upstream.requests
        func run(_ request: RecordedRequest) -> Int {
            runStarts.lastIndex { $0 <= request.connectionID } ?? 0
        }
        var received = [Set<String>](repeating: [], count: Self.kills + 1)
        var deliveredIn = [Set<String>](repeating: [], count: Self.kills + 1)
        // Within one run, a process never sends again what it saw delivered.
        var sentAfterDelivery: [String] = []
        for request in requests {
            let key = request.idempotencyKey ?? "(none)"
            let k = run(request)
            if deliveredIn[k].contains(key) { sentAfterDelivery.append("\(key) in run \(k)") }
            received[k].insert(key)
            if Self.delivered(request.index) { deliveredIn[k].insert(key) }
        }
        #expect(sentAfterDelivery.isEmpty, "sent again by the process that saw it delivered: \(sentAfterDelivery.prefix(5))")

        var deliveredBefore = Set<String>()
        var redeliveredPerKill: [Int] = []
        for kill in 0..<Self.kills {
            deliveredBefore.formUnion(deliveredIn[kill])
            redeliveredPerKill.append(received[kill + 1].intersection(deliveredBefore).count)
        }
        for (kill, count) in redeliveredPerKill.enumerated() {
            #expect(count <= Self.bound, "kill \(kill): \(count) operations delivered before it were sent again (all: \(redeliveredPerKill))")
        }
        // Every kill fell in the replay: work was left for the next run.
        #expect(received.dropFirst().allSatisfy { !$0.isEmpty }, "runs with nothing to send: \(received.map(\.count))")

        deliveredBefore.formUnion(deliveredIn[Self.kills])
        let missing = queued.acknowledged.keys.sorted().filter { !deliveredBefore.contains(DurabilityTests.key($0)) }
        #expect(missing.isEmpty, "\(missing.count) acknowledged writes never delivered, e.g. \(missing.prefix(10))\n\(outbox)")
        #expect(status.object("counts")?.int("completed") == Self.operations, "\(status)")
        #expect(status.object("counts")?.int("failed") == 0, "\(status)")
    }
}

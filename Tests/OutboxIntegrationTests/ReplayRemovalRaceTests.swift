import Foundation
import Testing

/// Nothing reported removed is ever sent (SPEC §4): a bulk delete of the pending operations,
/// issued while the lane is delivering them, removes only what it can remove before the lane
/// takes it. The race is run again and again, at a different point of the lane each time.
@Suite("Replay: removals racing the lane", .harnessThreads)
struct ReplayRemovalRaceTests {
    static let rounds = 12
    static let perRound = 40

    /// `PUT /admin/connectivity` to `mode` (`offline`: store everything, replay nothing).
    static func setConnectivity(_ outbox: OutboxProcess, _ mode: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let response = try outbox.send("PUT", "/admin/connectivity", body: #"{"mode":"\#(mode)"}"#,
                                       headers: [HeaderField("Content-Type", "application/json")])
        #expect(response.status == 200, "\(response)", sourceLocation: sourceLocation)
    }

    @Test func aBulkDeleteOfPendingOperationsRacingTheLane_NeverLetsARemovedOneReachTheUpstream() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        var sentAfterRemoval: [String] = []
        var removedInAll = 0
        var deliveredInAll = 0
        for round in 0..<Self.rounds {
            try Self.setConnectivity(outbox, "offline")
            let operations = try (0..<Self.perRound).map { try outbox.enqueue(body: "r\(round)-\($0)") }
            let seen = upstream.requests.count
            try Self.setConnectivity(outbox, "auto")
            // The delete lands at a different point of the lane each round.
            if round % 3 != 0 { _ = try await upstream.waitForRequests(seen + round % 3 * 4) }
            let answer = try JSONObject(outbox.send("DELETE", "/admin/operations?status=pending"))
            try outbox.drain()

            let removed = try operations.filter { try outbox.admin("operations/\($0.id)").status == 404 }
            #expect(answer.int("removed") == removed.count, "round \(round): \(answer), \(removed.count) gone")
            let received = Set(upstream.requests.dropFirst(seen).compactMap(\.idempotencyKey))
            sentAfterRemoval += removed.filter { received.contains($0.idempotencyKey) }.map { "round \(round): \($0.id)" }
            removedInAll += removed.count
            deliveredInAll += received.count
            #expect(received.count + removed.count == Self.perRound,
                    "round \(round): \(received.count) delivered and \(removed.count) removed of \(Self.perRound)")
        }
        #expect(sentAfterRemoval.isEmpty, "reported removed, yet sent: \(sentAfterRemoval)")
        // The race was run: the deletes removed operations while others were being delivered.
        #expect(removedInAll > 0 && deliveredInAll > 0, "removed \(removedInAll), delivered \(deliveredInAll)")
    }
}

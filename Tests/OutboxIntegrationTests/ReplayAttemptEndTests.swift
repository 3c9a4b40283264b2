import Foundation
import Testing

/// No replay attempt without an end (SPEC §4): `replay.attemptTimeoutSeconds` ends an attempt
/// whose response trickles or never ends, and removing an operation in flight (delete, prune)
/// closes its exchange at once; either way the lane behind it goes on, and nothing removed is
/// sent again.
@Suite("Replay: every attempt ends", .harnessThreads)
struct ReplayAttemptEndTests {
    /// A body of 400 bytes at one byte every 0.5 s: 200 s, far past every bound below, and
    /// each byte restarts the response timeout.
    static let trickled = UpstreamResponse(status: 201, body: .bytes([UInt8](repeating: UInt8(ascii: "t"), count: 400)))

    @Test func aTricklingAndAnEndlessResponseEndAtTheAttemptDeadline_TheLanesBehindThemAreDelivered_AndDrainFinishes() async throws {
        let upstream = try TestUpstream { request in
            switch request.target {
            case "/trickle": .trickle(Self.trickled, every: .milliseconds(500))
            case "/endless": .endless(UpstreamResponse(status: 201))
            default: .respond(.text("created", status: 201))
            }
        }
        upstream.stop()
        // Two slots for two stuck lanes: without a deadline they hold the origin's whole replay.
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(
            retry: #""preset": "immediate", "maxRetries": 1"#, replay: #""maxConcurrentPerOrigin": 2, "attemptTimeoutSeconds": 1"#))
        let trickle = try outbox.enqueue("/trickle", body: "t-0", headers: [HeaderField("Outbox-Ordering-Key", "t")])
        let endless = try outbox.enqueue("/endless", body: "e-0", headers: [HeaderField("Outbox-Ordering-Key", "e")])
        var behind: [QueuedOperation] = []
        for n in 1...2 {
            behind.append(try outbox.enqueue("/after", body: "t-\(n)", headers: [HeaderField("Outbox-Ordering-Key", "t")]))
            behind.append(try outbox.enqueue("/after", body: "e-\(n)", headers: [HeaderField("Outbox-Ordering-Key", "e")]))
            behind.append(try outbox.enqueue("/after", body: "o-\(n)", headers: [HeaderField("Outbox-Ordering-Key", "o")]))
        }
        try upstream.restart()
        try outbox.drain(timeoutSeconds: 30)

        for stuck in [trickle, endless] {
            let document = try outbox.operation(stuck.id)
            #expect(document.string("status") == "failed", "\(document)")
            #expect(document.string("lastError") == "attempt timed out after 1 s (retries exhausted)", "\(document)")
        }
        for operation in behind {
            #expect(try outbox.operation(operation.id).string("status") == "completed")
        }
        let requests = upstream.requests
        #expect(requests.count(where: { $0.target == "/trickle" }) == 2, "1 + maxRetries attempts: \(requests.map(\.target))")
        #expect(requests.count(where: { $0.target == "/endless" }) == 2, "1 + maxRetries attempts: \(requests.map(\.target))")
        // Outbox closed each stuck exchange (never returned its connection to the pool).
        for request in requests where request.target != "/after" {
            try await upstream.waitForPeerClose(ofRequest: request.index, timeout: .seconds(5))
        }
        for key in ["t", "e"] {
            #expect(requests.filter { $0.bodyText.hasPrefix("\(key)-") }.map(\.bodyText) == ["\(key)-0", "\(key)-0", "\(key)-1", "\(key)-2"],
                    "lane \(key) out of order: \(requests.map(\.bodyText))")
        }
    }

    @Test func deletingAnOperationInFlightClosesItsExchangeAtOnce_AndItIsNeverSentAgain() async throws {
        let upstream = try TestUpstream { request in
            request.target == "/held" ? .holdUntilPeerCloses : .respond(.text("created", status: 201))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let held = try outbox.enqueue("/held", body: "held")
        let behind = try outbox.enqueue("/behind", body: "behind")
        try upstream.restart()
        let first = try #require(try await upstream.waitForRequests(1).first)
        #expect(first.target == "/held")
        #expect(try outbox.operation(held.id).string("status") == "inProgress")

        let deleted = try outbox.send("DELETE", "/admin/operations/\(held.id)")
        #expect(deleted.status == 204, "\(deleted)")
        try await upstream.waitForPeerClose(ofRequest: first.index, timeout: .seconds(5))
        _ = try await outbox.waitForOperation(behind.id, toBe: ["completed"])
        try outbox.drain()
        #expect(upstream.requests.map(\.target) == ["/held", "/behind"], "\(upstream.requests.map(\.target))")
        #expect(try outbox.admin("operations/\(held.id)").status == 404)
    }

    @Test func pruningWhileAnOperationIsInFlightClosesItsExchange_AndNothingPrunedIsSentAfterwards() async throws {
        let upstream = try TestUpstream { request in
            request.target.hasPrefix("/held") ? .holdUntilPeerCloses : .respond(.text("created", status: 201))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        var pruned: [String] = []
        for round in 0..<3 {
            try ReplayRemovalRaceTests.setConnectivity(outbox, "offline")
            let operations = try (0..<4).map { n in
                try outbox.enqueue(n == 0 ? "/held-\(round)" : "/pruned", body: "r\(round)-\(n)")
            }
            let seen = upstream.requests.count
            try ReplayRemovalRaceTests.setConnectivity(outbox, "auto")
            let held = try #require(try await upstream.waitForRequests(seen + 1).last)
            #expect(held.target == "/held-\(round)", "\(held.target)")

            let answer = try JSONObject(outbox.send("POST", "/admin/prune?olderThanSeconds=0"))
            #expect(answer.int("removed") == (round == 0 ? 4 : 5), "the round's four and the last round's kept one: \(answer)")
            try await upstream.waitForPeerClose(ofRequest: held.index, timeout: .seconds(5))
            pruned += operations.map(\.id)
            // Completed and still kept: the next round's prune removes it too.
            _ = try outbox.enqueue("/kept", body: "kept-\(round)", headers: [HeaderField("Outbox-Mode", "queue")])
            try outbox.drain()
        }
        #expect(upstream.requests.filter { $0.target == "/pruned" }.isEmpty,
                "pruned operations were sent: \(upstream.requests.map(\.bodyText))")
        #expect(upstream.requests.filter { $0.target.hasPrefix("/held") }.count == 3, "\(upstream.requests.map(\.bodyText))")
        for id in pruned { #expect(try outbox.admin("operations/\(id)").status == 404) }
    }
}

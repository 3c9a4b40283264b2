import Foundation
import Synchronization
import Testing

/// Origins that clients name and that fail, with nothing stored for them: Outbox does not
/// probe them (it would otherwise scan whatever ports clients name, forever), the next request
/// simply tries again, and after `reachability.forgetAfterSeconds` without traffic they are
/// gone from `/admin/status` and `/admin/metrics`. Origins with stored work keep being probed
/// and listed; so does the configured upstream.
@Suite("Origins with nothing stored: not probed, forgotten", .harnessThreads)
struct OriginForgettingTests {
    static let config = """
        {"reachability": {"probeIntervalSeconds": 0.1, "connectTimeoutSeconds": 1, "forgetAfterSeconds": 0.5},
         "retry": {"preset": "immediate"}}
        """

    /// `GET http://127.0.0.1:PORT/…` through the forward proxy on a fresh connection.
    static func forwardGET(_ outbox: OutboxProcess, port: UInt16) throws -> HTTPResponse {
        try outbox.exchange("GET http://127.0.0.1:\(port)/probe-me HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
    }

    /// The origins `/admin/status` lists, by their `origin` text.
    static func listedOrigins(_ outbox: OutboxProcess) throws -> [String: JSONObject] {
        let status = try JSONObject(outbox.admin("status"))
        return Dictionary((status.objects("origins") ?? []).compactMap { entry in entry.string("origin").map { ($0, entry) } },
                          uniquingKeysWith: { first, _ in first })
    }

    @Test func failedOriginsWithNothingStored_AreNotProbed_AndAreForgotten_WhileStoredWorkIsProbedAndKept() async throws {
        let configured = try TestUpstream()
        // Ten origins that listen and answer 503 (an unavailable status: "unreachable") and count
        // every connection, so a probe cannot go unseen; ten ports where nothing listens.
        let unavailable = try (0..<10).map { _ in try TestUpstream { _ in .respond(.text("down", status: 503)) } }
        let closed = try (0..<10).map { _ in try LocalPort.refusing() }
        // One origin that is down while a write for it is stored: that one must be probed.
        let withWork = try TestUpstream()
        withWork.stop()
        let outbox = try await OutboxProcess.start(upstream: configured.baseURL, config: Self.config)
        // Each origin is announced as it goes offline: the proof that Outbox noted every one,
        // however long the test takes (status alone could already have forgotten the first).
        let events = try EventStreamClient(outbox)
        defer { events.client.close() }

        for origin in unavailable {
            let response = try Self.forwardGET(outbox, port: origin.port)
            #expect(response.status == 503 && response.bodyText == "down", "\(response)\n\(outbox)")
        }
        for port in closed.map(\.port) {
            let response = try Self.forwardGET(outbox, port: port)
            #expect(response.status == 503, "\(response)\n\(outbox)")
        }
        let stored = try QueuedOperation(outbox.exchange(
            "POST http://\(withWork.authority)/kept HTTP/1.1\r\nHost: \(withWork.authority)\r\nContent-Length: 4\r\n\r\nkept",
            method: "POST"))

        let failedNames = (unavailable.map(\.port) + closed.map(\.port)).map { "http://127.0.0.1:\($0)" }
        var announced: Set<String> = []
        while !announced.isSuperset(of: failedNames) {
            let event = try events.next { $0.type == "origin" }
            let data = try event.json()
            if data.bool("online") == false, let name = data.string("origin") { announced.insert(name) }
        }

        // Forgotten once nothing touched them for forgetAfterSeconds (the sweep runs every second).
        let deadline = Deadline(after: .seconds(30))
        var remaining = failedNames
        while true {
            let expired = deadline.hasPassed
            let now = try Self.listedOrigins(outbox)
            remaining = failedNames.filter { now[$0] != nil }
            if remaining.isEmpty || expired { break }
            await outbox.waitForActivity(after: outbox.child.observed.value.stderr.count)
        }
        #expect(remaining.isEmpty, "still listed after forgetAfterSeconds 0.5: \(remaining)\n\(outbox)")
        let laterMetrics = try outbox.admin("metrics").bodyText
        for name in failedNames {
            #expect(!laterMetrics.contains("origin=\"\(name)\""), "\(name) still has a metric series")
        }

        // Meanwhile (well over a second at 0.1 s a probe) no origin without stored work was
        // probed: each listener saw exactly the connection of its one GET.
        for origin in unavailable {
            #expect(origin.acceptedConnectionCount == 1,
                    "origin \(origin.port) accepted \(origin.acceptedConnectionCount) connections: probed")
        }

        // The origin with stored work is kept, offline, its next probe scheduled; the configured
        // upstream stays listed too.
        let kept = try Self.listedOrigins(outbox)
        let entry = try #require(kept["http://\(withWork.authority)"], "the origin with stored work was forgotten: \(kept.keys.sorted())")
        #expect(entry.bool("online") == false)
        #expect(entry.string("nextProbeAt") != nil, "\(entry)")
        #expect(kept[configured.baseURL] != nil, "the configured upstream was forgotten: \(kept.keys.sorted())")
        // Its probes find it back, and the write is delivered.
        try withWork.restart()
        _ = try await outbox.waitForOperation(stored.id, toBe: ["completed"])
        #expect(try await withWork.waitForRequests(1).first?.bodyText == "kept")
    }

    @Test func aFailedOriginWithNothingStored_IsTriedAgainByTheNextRequest() async throws {
        let configured = try TestUpstream()
        let answered = Atomic<Int>(0)
        // Unavailable once, then fine.
        let origin = try TestUpstream { _ in
            answered.add(1, ordering: .relaxed).newValue == 1 ? .respond(.text("down", status: 503)) : .respond(.text("back"))
        }
        // Probes an hour apart: only a request could find the origin back within the test.
        let outbox = try await OutboxProcess.start(upstream: configured.baseURL, config: """
            {"reachability": {"probeIntervalSeconds": 3600}}
            """)
        let first = try Self.forwardGET(outbox, port: origin.port)
        #expect(first.status == 503 && first.bodyText == "down", "\(first)\n\(outbox)")
        let second = try Self.forwardGET(outbox, port: origin.port)
        #expect(second.status == 200 && second.bodyText == "back",
                "the second GET was not tried at the origin: \(second)\n\(outbox)")
        #expect(try await origin.waitForRequests(2).count == 2)
    }
}

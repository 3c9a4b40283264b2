import Foundation
import Synchronization
import Testing

/// Fault rules (`/admin/faults`) through the real binary: each action stands in for the real
/// failure at the moment Outbox would send upstream, direct and on replay, and the upstream
/// receives nothing a rule answered.
@Suite("Fault injection", .harnessThreads)
struct FaultInjectionTests {
    static func addFault(_ outbox: OutboxProcess, _ rule: String) throws -> JSONObject {
        let response = try outbox.send("POST", "/admin/faults", body: rule, headers: [HeaderField("Content-Type", "application/json")])
        guard response.status == 201 else { throw HarnessError("POST /admin/faults \(rule) answered:\n\(response)") }
        return try JSONObject(response)
    }

    static func faults(_ outbox: OutboxProcess) throws -> [JSONObject] {
        try JSONObject(try outbox.admin("faults")).objects("faults") ?? []
    }

    static func origin(_ outbox: OutboxProcess) throws -> JSONObject? {
        try JSONObject(try outbox.admin("status")).objects("origins")?.first
    }

    @Test func aDirectStatus503IsAnOutageAWriteIsStoredAReadGets503AndTheUpstreamSeesNothing() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("real", status: 201)) }
        // Plenty of retries: the probe (a TCP connect) finds the real upstream, so the replay
        // meets the rule again and again until it is removed.
        let config = OutboxProcess.fastQueueConfig(retry: #""preset": "immediate", "maxRetries": 1000"#)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: config)
        _ = try Self.addFault(outbox, #"{"id":"down","action":"status","status":503,"body":"{\"error\":\"maintenance\"}","retryAfterSeconds":1}"#)

        let stored = try outbox.enqueue(body: "write")
        let read = try outbox.send("GET", "/items")
        #expect(read.status == 503, "\(read)")
        #expect(try outbox.operation(stored.id).string("status") != "completed")
        #expect(upstream.requests.isEmpty, "\(upstream.requests)")

        // The rule gone, the probe finds the real upstream and the stored write is delivered.
        #expect(try outbox.send("DELETE", "/admin/faults/down").status == 204)
        try outbox.drain()
        #expect(try outbox.operation(stored.id).string("status") == "completed")
        #expect(upstream.requests.map(\.bodyText) == ["write"])
    }

    @Test func aDirectStatusOutsideTheOutageListIsTheClientsAnswer() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("real")) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        _ = try Self.addFault(outbox, #"{"action":"status","status":429,"retryAfterSeconds":2.5,"body":"slow down","match":{"method":"POST"}}"#)
        let refused = try outbox.send("POST", "/items", body: "x")
        #expect(refused.status == 429 && refused.bodyText == "slow down", "\(refused)")
        #expect(refused.headers["Retry-After"] == "3", "\(refused)")
        // Only POST matches.
        #expect(try outbox.send("GET", "/items").bodyText == "real")
        #expect(upstream.requests.map(\.method) == ["GET"])
        let rule = try #require(try Self.faults(outbox).first)
        #expect(rule.int("matched") == 1 && rule.int("applied") == 1, "\(rule)")
    }

    @Test func replayFaultsFollowTheOutcomeTable() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let retried = try outbox.enqueue("/retried", body: "a")
        let refused = try outbox.enqueue("/refused", body: "b")
        // Two retryable failures, then the real upstream; a permanent one for the other write.
        _ = try Self.addFault(outbox, #"{"applyTo":"replay","match":{"pathPrefix":"/retried"},"action":"status","status":500,"times":2}"#)
        _ = try Self.addFault(outbox, #"{"applyTo":"replay","match":{"pathPrefix":"/refused"},"action":"status","status":400}"#)
        try upstream.restart()
        try outbox.drain()

        let delivered = try outbox.operation(retried.id)
        #expect(delivered.string("status") == "completed" && delivered.int("retryCount") == 2, "\(delivered)")
        #expect(try outbox.operation(refused.id).string("status") == "failed")
        #expect(upstream.requests.map(\.target) == ["/retried"], "\(upstream.requests)")
        #expect(upstream.requests.first?.headers["Outbox-Attempt"] == "3")
        let rules = try Self.faults(outbox)
        #expect(rules.map { $0.bool("exhausted") } == [true, false], "\(rules)")
        #expect(rules.map { $0.int("applied") } == [2, 1], "\(rules)")
    }

    @Test func aResetMakesTheOriginUnreachableDirectAndOnReplay() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        _ = try Self.addFault(outbox, #"{"action":"reset","times":2}"#)
        let reset = try outbox.enqueue(body: "after a reset")
        #expect(try Self.origin(outbox)?.string("lastError") == "no response: connection reset by peer (fault)")
        // The second reset hits the first replay attempt; the second attempt goes through.
        try outbox.drain()
        let delivered = try outbox.operation(reset.id)
        #expect(delivered.string("status") == "completed" && delivered.int("retryCount") == 1, "\(delivered)")
        #expect(upstream.requests.map { $0.headers["Outbox-Attempt"] } == ["2"], "\(upstream.requests)")
    }

    @Test func aTimeoutMakesTheOriginUnreachableAndTheUpstreamSeesOnlyTheReplay() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        let outbox = try await OutboxProcess.start(
            upstream: upstream.baseURL,
            config: #"{"reachability": {"probeIntervalSeconds": 0.1, "responseTimeoutSeconds": 1}, "retry": {"preset": "immediate", "maxRetries": 100}}"#)
        _ = try Self.addFault(outbox, #"{"action":"timeout","applyTo":"direct","times":1}"#)
        let timedOut = try outbox.enqueue(body: "after a timeout")
        #expect(try Self.origin(outbox)?.string("lastError") == "response timeout")
        try outbox.drain()
        #expect(try outbox.operation(timedOut.id).string("status") == "completed")
        // Every request the upstream saw is a replay attempt: the direct one never reached it.
        // (A loaded machine may time out a real attempt too, so their number is not asserted.)
        let requests = upstream.requests
        #expect(!requests.isEmpty && requests.allSatisfy { $0.headers["Outbox-Attempt"] != nil }, "\(requests)")
    }

    @Test func aReplayTimeoutIsRetriedAndTheUpstreamNeverSawThatAttempt() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        upstream.stop()
        let outbox = try await OutboxProcess.start(
            upstream: upstream.baseURL,
            config: #"{"reachability": {"probeIntervalSeconds": 0.1, "responseTimeoutSeconds": 1}, "retry": {"preset": "immediate", "maxRetries": 100}}"#)
        let stored = try outbox.enqueue(body: "replayed after a timeout")
        _ = try Self.addFault(outbox, #"{"action":"timeout","applyTo":"replay","times":1}"#)
        try upstream.restart()
        try outbox.drain()
        let delivered = try outbox.operation(stored.id)
        #expect(delivered.string("status") == "completed" && (delivered.int("retryCount") ?? 0) >= 1, "\(delivered)")
        // The first attempt was the rule's: the upstream's first request is attempt 2 or later.
        let first = try #require(upstream.requests.first)
        #expect(Int(first.headers["Outbox-Attempt"] ?? "") ?? 0 >= 2, "\(upstream.requests)")
        #expect(try Self.faults(outbox).first?.int("applied") == 1)
    }

    /// The replay's response timeout against a real upstream rather than a rule's timer: the
    /// first attempt's request arrives and the upstream says nothing; Outbox gives up after
    /// `responseTimeoutSeconds`, closes that connection, and the next attempt delivers.
    @Test func aSilentUpstreamTimesOutAReplayAttemptAndTheNextDelivers() async throws {
        let posts = Mutex(0)
        let upstream = try TestUpstream { request in
            let first = request.method == "POST" && posts.withLock { count in
                count += 1
                return count == 1
            }
            return first ? .holdUntilPeerCloses : .respond(.text("created", status: 201))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(
            upstream: upstream.baseURL,
            config: #"{"reachability": {"probeIntervalSeconds": 0.1, "responseTimeoutSeconds": 0.5}, "retry": {"preset": "immediate", "maxRetries": 100}}"#)
        let stored = try outbox.enqueue(body: "replayed after a silence")
        try upstream.restart()
        try outbox.drain()
        let delivered = try outbox.operation(stored.id)
        #expect(delivered.string("status") == "completed" && (delivered.int("retryCount") ?? 0) >= 1, "\(delivered)")
        let sent = upstream.requests.filter { $0.method == "POST" }
        try #require(sent.count >= 2, "\(upstream.requests)")
        #expect(sent.allSatisfy { $0.bodyText == "replayed after a silence" })
        #expect(sent.map { $0.headers["Outbox-Attempt"] } == (1...sent.count).map { "\($0)" }, "\(sent)")
        // The silent attempt's connection was given up by Outbox, not left open.
        try await upstream.waitForPeerClose(ofRequest: sent[0].index)
    }

    @Test func aReplayLatencyWaitsThenDelivers() async throws {
        let arrivals = Mutex<[ContinuousClock.Instant]>([])
        let upstream = try TestUpstream { _ in
            arrivals.withLock { $0.append(.now) }
            return .respond(.text("created", status: 201))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let stored = try outbox.enqueue(body: "late")
        _ = try Self.addFault(outbox, #"{"action":"latency","latencySeconds":0.5,"applyTo":"replay"}"#)
        // The attempt starts after the upstream is back (the probe finds it every 0.1 s): its
        // request arrives at least the rule's 0.5 s after that, however slow the machine.
        let restarted = ContinuousClock.now
        try upstream.restart()
        try outbox.drain()
        let waited = try #require(arrivals.withLock { $0.first }) - restarted
        #expect(waited >= .milliseconds(500), "the replayed request arrived \(waited) after the upstream came back")
        let delivered = try outbox.operation(stored.id)
        #expect(delivered.string("status") == "completed" && delivered.int("retryCount") == 0, "\(delivered)")
        #expect(upstream.requests.map { $0.headers["Outbox-Attempt"] } == ["1"], "\(upstream.requests)")
        let rule = try #require(try Self.faults(outbox).first)
        #expect(rule.int("applied") == 1 && rule.bool("exhausted") == false, "\(rule)")
    }

    @Test func offlineRefusesAndHoldsTheProbesUntilTheRuleIsRemoved() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        _ = try Self.addFault(outbox, #"{"id":"cut","action":"offline"}"#)
        let stored = try outbox.enqueue(body: "held")
        #expect(try Self.origin(outbox)?.string("lastError") == "connect failed: connection refused (fault)")

        // Probes come and go while the real upstream is up: each moves nextProbeAt (shown to the
        // second), and two seconds' worth of them leave it offline with nothing sent. One look
        // that finds nextProbeAt two seconds on is enough, however slowly this test gets to look.
        let format = ISO8601DateFormatter()
        let firstProbe = try #require(try Self.origin(outbox)?.string("nextProbeAt").flatMap { format.date(from: $0) })
        var latest = firstProbe
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            // Looks once more after the deadline: a look delayed past it must not fail on a stale answer.
            let expired = ContinuousClock.now >= deadline
            let logged = outbox.child.observed.value.stderr.count
            if let next = try Self.origin(outbox)?.string("nextProbeAt").flatMap({ format.date(from: $0) }) { latest = next }
            if latest.timeIntervalSince(firstProbe) >= 2 || expired { break }
            await outbox.waitForActivity(after: logged)
        }
        #expect(latest.timeIntervalSince(firstProbe) >= 2, "probes did not run: next probe \(firstProbe) → \(latest)")
        #expect(try Self.origin(outbox)?.bool("online") == false)
        #expect(upstream.requests.isEmpty)

        #expect(try JSONObject(try outbox.send("DELETE", "/admin/faults")).int("removed") == 1)
        try outbox.drain()
        #expect(try outbox.operation(stored.id).string("status") == "completed")
    }

    @Test func latencyWaitsThenForwardsForReal() async throws {
        let upstream = try TestUpstream { request in .respond(.text("echo " + request.bodyText)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        _ = try Self.addFault(outbox, #"{"action":"latency","latencySeconds":0.3}"#)
        let started = ContinuousClock.now
        let response = try outbox.send("PUT", "/items/1", body: "slow")
        let elapsed = ContinuousClock.now - started
        #expect(response.status == 200 && response.bodyText == "echo slow", "\(response)")
        #expect(elapsed >= .milliseconds(300), "answered after \(elapsed)")
        #expect(upstream.requests.map(\.bodyText) == ["slow"])
    }

    @Test func aSeededProbabilityGivesTheSameChoicesInTwoFreshProcesses() async throws {
        func choices() async throws -> [Bool] {
            let upstream = try TestUpstream { _ in .respond(.text("real")) }
            let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
            _ = try Self.addFault(outbox, #"{"action":"status","status":418,"probability":0.5,"seed":42}"#)
            var faulted: [Bool] = []
            for _ in 0..<24 { faulted.append(try outbox.send("GET", "/items").status == 418) }
            let rule = try #require(try Self.faults(outbox).first)
            #expect(rule.int("matched") == 24 && rule.int("applied") == faulted.filter { $0 }.count, "\(rule)")
            #expect(upstream.requests.count == faulted.filter { !$0 }.count)
            return faulted
        }
        let first = try await choices()
        let second = try await choices()
        #expect(first == second)
        #expect(first.contains(true) && first.contains(false), "probability 0.5 chose the same for all 24: \(first)")
    }

    /// Through the binary, deterministically: a rule whose window is far from its end applies,
    /// and one whose window is short ends and stops applying. Where a window's edge falls is
    /// `FaultBookTests` on an injected clock (real time cannot say how long this test slept).
    @Test func forSecondsEndsTheRule() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("real")) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        _ = try Self.addFault(outbox, #"{"id":"long","action":"status","status":418,"forSeconds":3600,"match":{"pathPrefix":"/long"}}"#)
        _ = try Self.addFault(outbox, #"{"id":"short","action":"status","status":418,"forSeconds":0.5,"match":{"pathPrefix":"/short"}}"#)
        #expect(try outbox.send("GET", "/long/a").status == 418)
        let deadline = ContinuousClock.now + .seconds(10)
        func short() throws -> JSONObject? { try Self.faults(outbox).first { $0.string("id") == "short" } }
        while true {
            let expired = ContinuousClock.now >= deadline
            let logged = outbox.child.observed.value.stderr.count
            if try short()?.bool("exhausted") == true || expired { break }
            await outbox.waitForActivity(after: logged)
        }
        #expect(try short()?.bool("exhausted") == true)
        #expect(try outbox.send("GET", "/short/b").status == 200)
        #expect(try short()?.int("applied") == 0)
        #expect(try outbox.send("GET", "/long/c").status == 418)
        let long = try #require(try Self.faults(outbox).first { $0.string("id") == "long" })
        #expect(long.int("applied") == 2 && long.bool("exhausted") == false, "\(long)")
    }

    @Test("an invalid rule is a 400 naming the field", arguments: [
        (#"{"status":503}"#, "action"),
        (#"{"action":"explode"}"#, "action"),
        (#"{"action":"status"}"#, "status"),
        (#"{"action":"status","status":99}"#, "status"),
        (#"{"action":"reset","status":503}"#, "status"),
        (#"{"action":"latency"}"#, "latencySeconds"),
        (#"{"action":"reset","probability":1.5}"#, "probability"),
        (#"{"action":"reset","times":0}"#, "times"),
        (#"{"action":"reset","applyTo":"sometimes"}"#, "applyTo"),
        (#"{"action":"reset","match":{"origin":"ftp://x"}}"#, "match.origin"),
        (#"{"action":"reset","match":{"pathPrefix":"v1"}}"#, "match.pathPrefix"),
        (#"{"action":"reset","match":{"host":"x"}}"#, "match.host"),
        (#"{"action":"reset","colour":"red"}"#, "colour"),
        (#"not json"#, "body"),
        (#"{"action":"reset","times":99999999999999999999}"#, "times"),
        (#"{"action":"reset","forSeconds":1e300}"#, "forSeconds"),
        (#"{"action":"reset","seed":NaN}"#, "seed"),
    ])
    func invalidRules(rule: String, field: String) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("real")) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let response = try outbox.send("POST", "/admin/faults", body: rule)
        #expect(response.status == 400, "\(response)")
        let message = try JSONObject(response).object("error")?.string("message") ?? ""
        #expect(message.hasPrefix(field + ": "), "\(message)")
        #expect(try Self.faults(outbox).isEmpty)
    }

    @Test func theThousandAndFirstRuleIsRefusedWith409AndNothingIsAdded() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        // One keep-alive connection: a thousand rules in well under a second.
        let client = try outbox.connect()
        func post(_ id: String) throws -> HTTPResponse {
            let body = #"{"id":"\#(id)","action":"reset"}"#
            try client.send("POST /admin/faults HTTP/1.1\r\nHost: 127.0.0.1:\(outbox.port)\r\nContent-Type: application/json\r\n"
                            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
            return try client.readResponse(to: "POST")
        }
        for number in 1...1000 {
            let added = try post("rule-\(number)")
            guard added.status == 201 else {
                Issue.record("rule \(number) answered:\n\(added)")
                return
            }
        }

        let refused = try post("rule-1001")
        expectErrorResponse(refused, status: 409, from: outbox)
        #expect(refused.errorEnvelope?.code == "fault_limit", "\(refused)")
        #expect(refused.errorEnvelope?.message.contains("1000") == true, "\(refused)")
        let listed = try Self.faults(outbox)
        #expect(listed.count == 1000 && !listed.contains { $0.string("id") == "rule-1001" }, "\(listed.count) rules listed")

        // Removing one makes room for one.
        #expect(try outbox.send("DELETE", "/admin/faults/rule-1").status == 204)
        #expect(try post("rule-1001").status == 201)
        #expect(try post("rule-1002").status == 409)
    }

    @Test func theFaultCommandsAddListAndClear() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("real")) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let added = try await AdminCommandTests.command(
            outbox, ["fault", "add", "--id", "teapot", "--action", "status", "--status", "418", "--times", "2", "--method", "GET"])
        #expect(added.exit == .exited(0), "\(added.stderrText)")
        #expect(added.stdoutText == "added fault teapot: status 418 for GET, 2 times\n", "\(added.stdoutText)")
        #expect(try outbox.send("GET", "/x").status == 418)

        let listed = try await AdminCommandTests.command(outbox, ["fault", "list"])
        #expect(listed.exit == .exited(0), "\(listed.stderrText)")
        let rows = AdminCommandTests.lines(listed.stdoutText)
        #expect(rows.count == 2 && rows[1].hasPrefix("teapot") && rows[1].hasSuffix("1        1        active"), "\(listed.stdoutText)")

        let duplicate = try await AdminCommandTests.command(outbox, ["fault", "add", "--id", "teapot", "--action", "reset"])
        #expect(duplicate.exit == .exited(1) && duplicate.stderrText.contains("HTTP 409"), "\(duplicate.stderrText)")
        let invalid = try await AdminCommandTests.command(outbox, ["fault", "add", "--action", "latency"])
        #expect(invalid.exit == .exited(1) && invalid.stderrText.contains("HTTP 400 bad_request: latencySeconds:"), "\(invalid.stderrText)")

        let cleared = try await AdminCommandTests.command(outbox, ["fault", "clear"])
        #expect(cleared.exit == .exited(0) && cleared.stdoutText == "removed 1 fault rules\n", "\(cleared.stdoutText)")
        #expect(try outbox.send("GET", "/x").status == 200)
    }
}

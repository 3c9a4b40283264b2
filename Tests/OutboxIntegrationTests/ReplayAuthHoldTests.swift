import Synchronization
import Testing

/// `replay.authStatuses` (SPEC §10): a replayed write answered 401 is held, not failed. It stays
/// pending with its retries unspent and `lastError` `auth: 401`, its lane sends nothing behind it,
/// its origin says `authRequired`, the metric counts it; a retry sends it again. A 403, not in
/// `authStatuses`, still fails at once.
@Suite("Replay: writes whose credentials are refused are held", .harnessThreads)
struct ReplayAuthHoldTests {
    @Test(arguments: TestStore.both) func aWriteAnswered401IsHeldWithItsLane_ThenARetryDeliversItInOrder(store: TestStore) async throws {
        let accepting = Atomic<Bool>(false)
        let upstream = try TestUpstream { _ in
            accepting.load(ordering: .relaxed) ? .respond(.text("created", status: 201)) : .respond(.text("token expired", status: 401))
        }
        upstream.stop()
        // A held write is tried again by itself after maxDelaySeconds: an hour here, so that only
        // the retry below sends it again.
        let config = OutboxProcess.fastQueueConfig(retry: #""preset": "immediate", "maxDelaySeconds": 3600"#)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, store: store)
        let first = try outbox.enqueue(body: "first", headers: [HeaderField("Authorization", "Bearer old")])
        let second = try outbox.enqueue(body: "second", headers: [HeaderField("Authorization", "Bearer old")])
        try upstream.restart()

        let held = try await outbox.waitForOperation(first.id, describedAs: "held with auth: 401") { document in
            document.string("lastError") == "auth: 401"
        }
        #expect(held.string("status") == "pending", "\(held)\n\(outbox)")
        #expect(held.int("retryCount") == 0, "a refused credential spent a retry: \(held)")
        let status = try JSONObject(outbox.admin("status"))
        let origin = status.objects("origins")?.first { $0.string("origin") == upstream.baseURL }
        #expect(origin?.bool("authRequired") == true, "\(status)")
        let metrics = try outbox.admin("metrics").bodyText
        #expect(metrics.contains("outbox_replay_auth_required_total 1"), "\(metrics)")
        // The lane holds: the second write was never sent, and only one attempt of the first.
        #expect(upstream.requests.map(\.bodyText) == ["first"], "\(upstream.requests.map(\.bodyText))")
        #expect(try outbox.operation(second.id).string("status") == "pending")

        accepting.store(true, ordering: .relaxed)
        let retried = try outbox.send("POST", "/admin/operations/\(first.id)/retry")
        #expect(retried.status == 200, "\(retried)")
        _ = try outbox.drain()
        #expect(upstream.requests.map(\.bodyText) == ["first", "first", "second"], "\(upstream.requests.map(\.bodyText))")
        #expect(upstream.requests.map(\.attempt) == [1, 2, 1], "the resend carries a higher Outbox-Attempt")
        #expect(try outbox.operation(first.id).string("status") == "completed")
        let after = try JSONObject(outbox.admin("status")).objects("origins")?.first { $0.string("origin") == upstream.baseURL }
        #expect(after?.bool("authRequired") == false, "an accepted write clears authRequired")
    }

    @Test(arguments: TestStore.both) func a403NotInAuthStatusesStillFails(store: TestStore) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("forbidden", status: 403)) }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        let queued = try outbox.enqueue(body: "x")
        try upstream.restart()
        let failed = try await outbox.waitForOperation(queued.id, toBe: ["failed"])
        #expect(failed.string("lastError") == "HTTP 403", "\(failed)")
        #expect(upstream.requests.count == 1)
    }

    /// A held lane blocks only itself: another lane of the same origin goes on, a write that
    /// depends on the held one waits (it does not fail), and credentials set by hand, with no
    /// rule configured, wake the held lane at once.
    @Test(arguments: TestStore.both) func aHeldLaneBlocksOnlyItself_ADependentWaits_AndCredentialsSetByHandReleaseIt(store: TestStore) async throws {
        let upstream = try TestUpstream { request in
            request.headers["Authorization"] == "Bearer good" ? .respond(.text("created", status: 201)) : .respond(.text("expired", status: 401))
        }
        upstream.stop()
        let config = OutboxProcess.fastQueueConfig(retry: #""preset": "immediate", "maxDelaySeconds": 3600"#)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, store: store)
        let lane = { (key: String) in HeaderField("Outbox-Ordering-Key", key) }
        let a0 = try outbox.enqueue(body: "a0", headers: [lane("a"), HeaderField("Authorization", "Bearer old")])
        let a1 = try outbox.enqueue(body: "a1", headers: [lane("a"), HeaderField("Authorization", "Bearer good")])
        let b0 = try outbox.enqueue(body: "b0", headers: [lane("b"), HeaderField("Authorization", "Bearer good")])
        let b1 = try outbox.enqueue(body: "b1", headers: [lane("b"), HeaderField("Authorization", "Bearer good"),
                                                          HeaderField("Outbox-Depends-On", a0.id)])
        try upstream.restart()

        _ = try await outbox.waitForOperation(a0.id, describedAs: "held with auth: 401") { $0.string("lastError") == "auth: 401" }
        _ = try await outbox.waitForOperation(b0.id, toBe: ["completed"])
        #expect(try outbox.operation(a1.id).string("status") == "pending")
        #expect(try outbox.operation(b1.id).string("status") == "pending", "a write depending on a held one must wait")
        #expect(Set(upstream.requests.map(\.bodyText)) == ["a0", "b0"], "\(upstream.requests.map(\.bodyText))")

        let body = #"{"origin": "\#(upstream.baseURL)", "headers": {"Authorization": "Bearer good"}}"#
        let set = try outbox.send("PUT", "/admin/credentials", body: body, headers: [HeaderField("Content-Type", "application/json")])
        #expect(set.status == 204, "\(set)")
        _ = try outbox.drain()
        for id in [a0.id, a1.id, b0.id, b1.id] { #expect(try outbox.operation(id).string("status") == "completed", "\(id)") }
        let laneA = upstream.requests.filter { $0.bodyText.hasPrefix("a") }.map(\.bodyText)
        #expect(laneA == ["a0", "a0", "a1"], "lane a out of order: \(laneA)")
        let sent = upstream.requests.map(\.bodyText)
        #expect((sent.lastIndex(of: "a0") ?? .max) < (sent.firstIndex(of: "b1") ?? -1), "b1 went before what it depends on: \(sent)")
    }

    /// A held write is not kept forever: its TTL still ends it `failed` with `expired`, after one
    /// attempt and with its retries unspent.
    @Test(arguments: TestStore.both) func aHeldWriteStillExpiresAtItsTTL(store: TestStore) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("expired", status: 401)) }
        upstream.stop()
        let config = OutboxProcess.fastQueueConfig(retry: #""preset": "immediate", "maxDelaySeconds": 3600"#, queue: #""ttlSeconds": 3"#)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, store: store)
        let queued = try outbox.enqueue(body: "x")
        try upstream.restart()
        let ended = try await outbox.waitForOperation(queued.id, toBe: ["failed"])
        #expect(ended.string("lastError") == "expired", "\(ended)")
        #expect(ended.int("retryCount") == 0, "\(ended)")
        #expect(upstream.requests.count == 1, "held once, never sent again: \(upstream.requests.count)")
    }

    /// CI's way in (SPEC §8.1): a fault rule answering 401 on replay holds the write without the
    /// upstream seeing it, the hold is an `operation` event, and `flush` sends it again.
    @Test func aFaultRuleAnswering401HoldsTheWrite_AsAnEvent_AndAFlushSendsItAgain() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        let config = OutboxProcess.fastQueueConfig(retry: #""preset": "immediate", "maxDelaySeconds": 3600"#)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: config)
        let events = try EventStreamClient(outbox)
        _ = try FaultInjectionTests.addFault(outbox, #"{"action": "status", "status": 401, "applyTo": "replay", "times": 1}"#)
        let queued = try outbox.enqueue(body: "x", headers: [HeaderField("Outbox-Mode", "queue")])
        let held = try events.next { event in
            event.type == "operation" && (try? event.json().string("lastError")) == "auth: 401"
        }
        let data = try held.json()
        #expect(data.string("id") == queued.id && data.string("status") == "pending" && data.int("retryCount") == 0, "\(held)")
        #expect(upstream.requests.isEmpty, "the fault answered; the upstream must see nothing")

        #expect(try outbox.send("POST", "/admin/flush").status == 202)
        _ = try outbox.drain()
        #expect(try outbox.operation(queued.id).string("status") == "completed")
        #expect(upstream.requests.map(\.bodyText) == ["x"])
    }

    /// With nothing else happening, a held write is tried again after `retry.maxDelaySeconds`,
    /// its retries still unspent.
    @Test func aHeldWriteIsTriedAgainByItselfAfterMaxDelaySeconds() async throws {
        let accepting = Atomic<Bool>(false)
        let upstream = try TestUpstream { _ in
            accepting.load(ordering: .relaxed) ? .respond(.text("created", status: 201)) : .respond(.text("token expired", status: 401))
        }
        let config = OutboxProcess.fastQueueConfig(retry: #""preset": "immediate", "maxDelaySeconds": 0.5, "maxRetries": 1"#)
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: config)
        let queued = try outbox.enqueue(body: "x", headers: [HeaderField("Outbox-Mode", "queue")])
        _ = try await outbox.waitForOperation(queued.id, describedAs: "held with auth: 401") { $0.string("lastError") == "auth: 401" }
        accepting.store(true, ordering: .relaxed)
        // No retry, no flush, no new credentials: only the held write's own schedule sends it.
        let done = try await outbox.waitForOperation(queued.id, toBe: ["completed"])
        #expect(done.int("retryCount") == 0, "holds spend no retry, even past maxRetries: \(done)")
        #expect(upstream.requests.count >= 2 && upstream.requests.last?.attempt == upstream.requests.count, "\(upstream.requests.map(\.attempt))")
    }
}

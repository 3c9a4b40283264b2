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
}

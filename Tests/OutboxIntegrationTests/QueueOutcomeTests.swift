import Testing

/// Permanent outcomes of a replay: 409 is a `conflict` that keeps the
/// upstream's answer, another 4xx is `failed`; either way the lane goes on with the next write.
@Suite("Queue: conflict and failure", .harnessThreads)
struct QueueOutcomeTests {
    @Test(arguments: TestStore.both) func conflictKeepsTheUpstreamBodyAndTheLaneMovesOn(store: TestStore) async throws {
        let upstream = try TestUpstream { request in
            request.bodyText == "clash"
                ? .respond(.text(#"{"reason":"version 7 exists"}"#, status: 409, headers: [HeaderField("X-Why", "stale")]))
                : .respond(.text("created", status: 201))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        let clash = try outbox.enqueue(body: "clash")
        let next = try outbox.enqueue(body: "next")
        try upstream.restart()
        try outbox.drain()

        let conflicted = try outbox.operation(clash.id)
        #expect(conflicted.string("status") == "conflict", "\(conflicted)")
        let conflict = try #require(conflicted.object("conflict"), "no conflict object: \(conflicted)")
        #expect(conflict.int("status") == 409, "\(conflict)")
        #expect(conflict.string("body") == #"{"reason":"version 7 exists"}"#, "\(conflict)")
        #expect(conflict.has("headers"), "\(conflict)")
        #expect(try outbox.operation(next.id).string("status") == "completed")
        // A conflict is not retried.
        #expect(upstream.requests.map(\.bodyText) == ["clash", "next"], "\(upstream.requests.map(\.bodyText))")
    }

    @Test(arguments: TestStore.both) func badRequestFailsAndTheLaneMovesOn(store: TestStore) async throws {
        let upstream = try TestUpstream { request in
            request.bodyText == "bad" ? .respond(.text("no such field", status: 400)) : .respond(.text("created", status: 201))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        let bad = try outbox.enqueue(body: "bad")
        let next = try outbox.enqueue(body: "next")
        try upstream.restart()
        try outbox.drain()

        let failed = try outbox.operation(bad.id)
        #expect(failed.string("status") == "failed", "\(failed)")
        #expect(failed.string("lastError")?.isEmpty == false, "\(failed)")
        #expect(failed.int("retryCount") == 0, "a 400 was retried: \(failed)")
        #expect(try outbox.operation(next.id).string("status") == "completed")
        #expect(upstream.requests.map(\.bodyText) == ["bad", "next"], "\(upstream.requests.map(\.bodyText))")
    }
}

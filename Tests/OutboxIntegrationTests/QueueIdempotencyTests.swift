import Glibc
import Testing

/// Idempotency keys: a repeated write with the same key and request is the same
/// operation, delivered once; the same key with another body is refused with 422; once
/// completed, a repeat gets the stored upstream response marked `Idempotent-Replayed: true`.
@Suite("Queue: idempotency", .harnessThreads)
struct QueueIdempotencyTests {
    @Test(arguments: TestStore.both) func repeatedKeyIsOneOperationDeliveredOnceThenReplayedFromStore(store: TestStore) async throws {
        let upstream = try TestUpstream { request in
            .respond(.text("created \(request.bodyText)", status: 201, headers: [HeaderField("X-Upstream", "yes")]))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        let key = [HeaderField("Idempotency-Key", "pay-123")]

        let first = try outbox.enqueue(body: "amount=5", headers: key)
        let again = try outbox.enqueue(body: "amount=5", headers: key)
        #expect(again.id == first.id, "the same request was stored twice: \(first.id) vs \(again.id)")
        #expect(again.idempotencyKey == "pay-123")

        let other = try outbox.send("POST", "/items", body: "amount=500", headers: key)
        expectErrorResponse(other, status: 422, from: outbox)

        try upstream.restart()
        try outbox.drain()
        let received = try await upstream.waitForRequests(1)
        #expect(received.count == 1, "\(received.map(\.bodyText))")
        #expect(received.first?.bodyText == "amount=5")
        #expect(received.first?.idempotencyKey == "pay-123")

        let replayed = try outbox.send("POST", "/items", body: "amount=5", headers: key)
        #expect(replayed.status == 201, "\(replayed)\n\(outbox)")
        #expect(replayed.bodyText == "created amount=5", "\(replayed)")
        #expect(replayed.headers["Idempotent-Replayed"] == "true", "\(replayed)")
        #expect(replayed.headers["Outbox-Operation-Id"] == first.id, "\(replayed)")
        #expect(replayed.headers["X-Upstream"] == "yes", "stored headers not replayed: \(replayed)")
        #expect(upstream.requests.count == 1, "the repeat reached the upstream: \(upstream.requests.map(\.bodyText))")
    }

    /// The key in a `202` for a request that came without one is Outbox's own, and its record
    /// carries no digest: a client that repeats the request under that key must still get the
    /// same operation, and another request under it a 422, also from a restarted process that
    /// knows the operation from disk only.
    @Test(arguments: TestStore.both) func keyOutboxMadeUpRecognisesItsRequestAcrossKillNine(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let home = try TemporaryDirectory()
        let data = home.file("data")
        let config = OutboxProcess.fastQueueConfig()
        let first = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data, store: store)
        let stored = try first.enqueue("/orders?x=1", body: "amount=5")
        let key = [HeaderField("Idempotency-Key", stored.idempotencyKey)]

        func expectOneOperation(_ outbox: OutboxProcess, _ moment: String) throws {
            let again = try outbox.enqueue("/orders?x=1", body: "amount=5", headers: key)
            #expect(again.id == stored.id, "\(moment): the same request under its made-up key was stored again: \(again.id) vs \(stored.id)")
            expectErrorResponse(try outbox.send("POST", "/orders?x=1", body: "amount=6", headers: key), status: 422, from: outbox)
            expectErrorResponse(try outbox.send("POST", "/orders?x=2", body: "amount=5", headers: key), status: 422, from: outbox)
            expectErrorResponse(try outbox.send("PUT", "/orders?x=1", body: "amount=5", headers: key), status: 422, from: outbox)
            let status = try JSONObject(outbox.admin("status"))
            #expect(status.object("counts")?.int("pending") == 1, "\(moment): \(status)")
        }
        try expectOneOperation(first, "before the kill")
        first.terminate(signal: SIGKILL)
        #expect(try await first.waitForExit() == .signaled(SIGKILL))
        let second = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data, store: store)
        try expectOneOperation(second, "after kill -9 and a restart")
    }

    @Test(arguments: TestStore.both) func sameKeyWithAnotherTargetIsUnprocessable(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        let key = [HeaderField("Idempotency-Key", "k-target")]

        _ = try outbox.enqueue("/a", body: "same", headers: key)
        let response = try outbox.send("POST", "/b", body: "same", headers: key)
        expectErrorResponse(response, status: 422, from: outbox)
        let status = try JSONObject(outbox.admin("status"))
        #expect(status.object("counts")?.int("pending") == 1, "\(status)")
    }

    /// Keys are scoped to an origin (SPEC §4): the same key, path and body sent through the
    /// forward proxy to another origin is another operation, delivered there, and a repeat to
    /// each origin gets that origin's own stored answer. On a global key table the second
    /// origin's write was answered with the first's operation and never delivered.
    @Test(arguments: TestStore.both) func sameKeyToAnotherOriginIsAnotherOperation_EachDeliveredAndAnsweredByItsOwn(store: TestStore) async throws {
        let first = try TestUpstream { _ in .respond(.text("first origin", status: 201)) }
        let second = try TestUpstream { _ in .respond(.text("second origin", status: 201)) }
        first.stop()
        second.stop()
        let outbox = try await OutboxProcess.start(upstream: first.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["127.0.0.1"]},
             "reachability": {"probeIntervalSeconds": 0.1, "connectTimeoutSeconds": 1},
             "retry": {"preset": "immediate"}}
            """, store: store)
        let key = [HeaderField("Idempotency-Key", "shared-key")]
        let atFirst = try outbox.enqueue("\(first.baseURL)/pay", body: "amount=5", headers: key)
        let atSecond = try outbox.enqueue("\(second.baseURL)/pay", body: "amount=5", headers: key)
        #expect(atSecond.id != atFirst.id, "the second origin's write was taken for the first origin's operation")
        #expect(try outbox.enqueue("\(second.baseURL)/pay", body: "amount=5", headers: key).id == atSecond.id)
        expectErrorResponse(try outbox.send("POST", "\(second.baseURL)/pay", body: "amount=6", headers: key),
                            status: 422, from: outbox)

        try first.restart()
        try second.restart()
        try outbox.drain()
        #expect(try await first.waitForRequests(1).map(\.bodyText) == ["amount=5"])
        #expect(try await second.waitForRequests(1).map(\.bodyText) == ["amount=5"])
        for (origin, text, id) in [(first, "first origin", atFirst.id), (second, "second origin", atSecond.id)] {
            let replayed = try outbox.send("POST", "\(origin.baseURL)/pay", body: "amount=5", headers: key)
            #expect(replayed.status == 201 && replayed.bodyText == text, "\(replayed)\n\(outbox)")
            #expect(replayed.headers["Outbox-Operation-Id"] == id, "\(replayed)")
        }
        #expect(first.requests.count == 1 && second.requests.count == 1, "a repeat reached an upstream")
    }

    /// A stored response is given back only to a request with the credentials of the one that
    /// made it (SPEC §4): another user repeating the key gets `422 idempotency_key_in_use`,
    /// not the first user's answer (which can echo a secret), also after a restart, when the
    /// digest comes from the record on disk. (A clean stop: after kill -9 the completion may not
    /// be on disk yet, and the write would rightly be delivered again.)
    @Test(arguments: TestStore.both) func storedResponseIsGivenOnlyToTheSameCredentials_AlsoAfterARestart(store: TestStore) async throws {
        let upstream = try TestUpstream { request in
            .respond(.text("secret for \(request.headers.values("Authorization").first ?? "nobody")", status: 201))
        }
        upstream.stop()
        let home = try TemporaryDirectory()
        let data = home.file("data")
        let config = """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["127.0.0.1"]},
             "reachability": {"probeIntervalSeconds": 0.1, "connectTimeoutSeconds": 1},
             "retry": {"preset": "immediate"}}
            """
        let first = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data, store: store)
        func headers(_ extra: [HeaderField]) -> [HeaderField] { [HeaderField("Idempotency-Key", "pay-9")] + extra }
        let alice = [HeaderField("Authorization", "Bearer alice"), HeaderField("Cookie", "s=1")]
        let stored = try first.enqueue("/pay", body: "amount=5", headers: headers(alice))
        try upstream.restart()
        try first.drain()
        first.terminate(signal: SIGTERM)
        #expect(try await first.waitForExit() == .exited(0))
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data, store: store)

        let again = try outbox.send("POST", "/pay", body: "amount=5", headers: headers(alice))
        #expect(again.status == 201 && again.bodyText == "secret for Bearer alice", "\(again)\n\(outbox)")
        #expect(again.headers["Outbox-Operation-Id"] == stored.id)
        let strangers: [[HeaderField]] = [
            [HeaderField("Authorization", "Bearer mallory"), HeaderField("Cookie", "s=1")],
            [HeaderField("Authorization", "Bearer alice")],
            [],
            alice + [HeaderField("Proxy-Authorization", "Basic bWFsbG9yeTo=")],
        ]
        for extra in strangers {
            let response = try outbox.send("POST", "/pay", body: "amount=5", headers: headers(extra))
            expectErrorResponse(response, status: 422, from: outbox)
            #expect(response.errorEnvelope?.code == "idempotency_key_in_use", "\(extra): \(response)")
            #expect(!response.bodyText.contains("secret"), "\(response)")
        }
        #expect(upstream.requests.count == 1, "a repeat reached the upstream")
    }
}

import Testing

/// In what order stored writes reach the origin: one at a time, higher
/// priority first, first-in first-out within a priority, and nothing overtakes an older
/// write that is still queued.
@Suite("Queue: delivery order", .harnessThreads)
struct QueueOrderingTests {
    @Test(arguments: TestStore.both) func thirtyWritesQueuedWhileDownArriveOnceEachInOrderWithTheirKeys(store: TestStore) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        var queued: [QueuedOperation] = []
        for n in 0..<30 {
            queued.append(try outbox.enqueue(body: "n=\(n)"))
        }
        #expect(upstream.requests.isEmpty)
        try upstream.restart()
        try outbox.drain()
        let received = try await upstream.waitForRequests(30)

        #expect(received.map(\.bodyText) == (0..<30).map { "n=\($0)" }, "\(received.map(\.bodyText))\n\(outbox)")
        #expect(received.map(\.idempotencyKey) == queued.map(\.idempotencyKey), "keys differ or are out of order")
        #expect(received.allSatisfy { $0.attempt == 1 }, "\(received.map(\.attempt))")
        #expect(received.allSatisfy { $0.method == "POST" && $0.target == "/items" })
        #expect(received.allSatisfy { $0.leakedControlHeaders.isEmpty })
        for operation in queued {
            #expect(try outbox.operation(operation.id).string("status") == "completed")
        }
        // The drain said everything is done: nothing may arrive after it.
        #expect(upstream.requests.count == 30, "duplicates: \(upstream.requests.map(\.bodyText))")
    }

    @Test(arguments: TestStore.both) func higherPriorityIsDeliveredFirstAndFIFOWithinAPriority(store: TestStore) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        let sent = ["low-1", "normal-1", "high-1", "critical-1", "low-2", "high-2", "normal-2", "critical-2", "normal-3"]
        for label in sent {
            let priority = String(label.prefix { $0 != "-" })
            // "normal" is also the default: one of them goes without the header.
            let headers = label == "normal-3" ? [] : [HeaderField("Outbox-Priority", priority)]
            let queued = try outbox.enqueue(body: label, headers: headers)
            #expect(try outbox.operation(queued.id).string("priority") == priority)
        }
        try upstream.restart()
        try outbox.drain()
        let received = try await upstream.waitForRequests(sent.count)

        #expect(received.map(\.bodyText) == [
            "critical-1", "critical-2", "high-1", "high-2", "normal-1", "normal-2", "normal-3", "low-1", "low-2",
        ], "\(outbox)")
        #expect(received.allSatisfy { $0.leakedControlHeaders.isEmpty }, "Outbox-Priority reached the upstream")
    }

    @Test(arguments: TestStore.both) func newWriteQueuesBehindAPendingOneEvenWhileTheUpstreamAnswers(store: TestStore) async throws {
        // The first write's delivery is held at the upstream (a gate the test opens), so it is
        // in progress for as long as the test needs, however loaded the machine; every other
        // request is answered at once.
        let release = Gate()
        let upstream = try TestUpstream { request in
            if request.bodyText == "first" {
                return .hold(until: release, then: .respond(.text("first done", status: 201)))
            }
            return .respond(.text("direct", status: 201))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        let first = try outbox.enqueue(body: "first", headers: [HeaderField("Outbox-Mode", "queue")])
        try await upstream.waitForRequests(1)
        #expect(try outbox.operation(first.id).string("status") == "inProgress", "the first write is not in flight")

        // The origin answers: a read goes straight through.
        let read = try outbox.send("GET", "/items")
        #expect(read.status == 201 && read.bodyText == "direct", "the origin is not reachable through the proxy:\n\(read)")

        // Forwarded, it would have come back 201 "direct": only a 202 shows it was queued.
        let second = try outbox.send("POST", "/items", body: "second")
        #expect(second.status == 202, "a write overtook a queued one:\n\(second)\n\(outbox)")
        #expect(upstream.requests.filter { $0.method == "POST" }.count == 1,
                "the second write reached the upstream before the first was done")

        release.open()
        try outbox.drain()
        let writes = upstream.requests.filter { $0.method == "POST" }
        #expect(writes.map(\.bodyText) == ["first", "second"], "\(writes.map(\.bodyText))")
        #expect(writes.map(\.attempt) == [1, 1], "\(writes.map(\.attempt))")
        #expect(try outbox.operation(first.id).string("status") == "completed")
        if second.status == 202 {
            let secondID = try QueuedOperation(second).id
            #expect(try outbox.operation(secondID).string("status") == "completed")
        }
    }
}

import Testing

/// `queue.maxOperations`: when the store is full a new write gets `507`, what is
/// stored stays intact, and the proxy keeps forwarding to origins that answer.
@Suite("Queue: limits", .harnessThreads)
struct QueueLimitTests {
    @Test(arguments: TestStore.both) func fullQueueRefusesWritesWith507AndStillForwardsReads(store: TestStore) async throws {
        let down = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        down.stop()
        let live = try TestUpstream { _ in .respond(.text("live")) }
        let outbox = try await OutboxProcess.start(upstream: down.baseURL, config: OutboxProcess.fastQueueConfig(
            queue: #""maxOperations": 3"#), store: store)

        var stored: [QueuedOperation] = []
        for n in 0..<3 {
            stored.append(try outbox.enqueue(body: "n=\(n)"))
        }
        let refused = try outbox.send("POST", "/items", body: "n=3")
        expectErrorResponse(refused, status: 507, from: outbox)

        // Forward mode to a second origin that answers.
        let read = try outbox.exchange("GET \(live.baseURL)/ping HTTP/1.1\r\nHost: \(live.authority)\r\n\r\n")
        #expect(read.status == 200 && read.bodyText == "live", "\(read)\n\(outbox)")

        try down.restart()
        try outbox.drain()
        #expect(down.requests.map(\.bodyText) == ["n=0", "n=1", "n=2"], "\(down.requests.map(\.bodyText))")
        for operation in stored {
            #expect(try outbox.operation(operation.id).string("status") == "completed")
        }
    }
}

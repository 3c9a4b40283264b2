import Testing

/// `Outbox-Depends-On`: an operation waits until the one it names (by id or by
/// idempotency key) is completed, and fails when that one ends failed or conflict.
@Suite("Queue: dependencies", .harnessThreads)
struct QueueDependencyTests {
    /// Answers 400 to a body starting with "reject", 201 to anything else.
    static let rejectsSome: TestUpstream.Handler = { request in
        request.bodyText.hasPrefix("reject") ? .respond(.text("invalid", status: 400))
            : .respond(.text("created", status: 201))
    }

    @Test(arguments: TestStore.both) func dependentWaitsForItsDependencyEvenWithHigherPriority(store: TestStore) async throws {
        let upstream = try TestUpstream(handler: Self.rejectsSome)
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        let parent = try outbox.enqueue(body: "parent", headers: [HeaderField("Outbox-Priority", "low")])
        // Critical would go first on priority alone; the dependency must hold it back.
        let child = try outbox.enqueue(body: "child", headers: [
            HeaderField("Outbox-Priority", "critical"), HeaderField("Outbox-Depends-On", parent.id),
        ])
        #expect(try outbox.operation(child.id).string("dependsOn") == parent.id)
        try upstream.restart()
        try outbox.drain()

        #expect(upstream.requests.map(\.bodyText) == ["parent", "child"], "\(outbox)")
        #expect(try outbox.operation(child.id).string("status") == "completed")
        #expect(upstream.requests.allSatisfy { $0.leakedControlHeaders.isEmpty }, "Outbox-Depends-On reached the upstream")
    }

    @Test(arguments: TestStore.both) func dependentFailsWhenItsDependencyFails(store: TestStore) async throws {
        let upstream = try TestUpstream(handler: Self.rejectsSome)
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        let parent = try outbox.enqueue(body: "reject-parent")
        let child = try outbox.enqueue(body: "child", headers: [HeaderField("Outbox-Depends-On", parent.id)])
        let bystander = try outbox.enqueue(body: "bystander")
        try upstream.restart()
        try outbox.drain()

        #expect(try outbox.operation(parent.id).string("status") == "failed")
        let failed = try outbox.operation(child.id)
        #expect(failed.string("status") == "failed", "\(failed)")
        #expect(failed.string("lastError")?.lowercased().contains("depend") == true,
                "lastError does not mention the dependency: \(failed)")
        #expect(try outbox.operation(bystander.id).string("status") == "completed")
        #expect(upstream.requests.map(\.bodyText) == ["reject-parent", "bystander"],
                "the dependent was delivered after all: \(upstream.requests.map(\.bodyText))")
    }

    @Test(arguments: TestStore.both) func dependencyCanBeNamedByIdempotencyKey(store: TestStore) async throws {
        let upstream = try TestUpstream(handler: Self.rejectsSome)
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        let parent = try outbox.enqueue(body: "parent", headers: [
            HeaderField("Idempotency-Key", "order-42"), HeaderField("Outbox-Priority", "low"),
        ])
        let child = try outbox.enqueue(body: "child", headers: [
            HeaderField("Outbox-Priority", "critical"), HeaderField("Outbox-Depends-On", "order-42"),
        ])
        // The admin API names the dependency by the operation's id, whatever the client wrote.
        #expect(try outbox.operation(child.id).string("dependsOn") == parent.id)
        try upstream.restart()
        try outbox.drain()

        #expect(upstream.requests.map(\.bodyText) == ["parent", "child"], "\(outbox)")
        #expect(try outbox.operation(child.id).string("status") == "completed")
    }
}

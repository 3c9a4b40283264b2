import Synchronization
import Testing

/// `Outbox-Ordering-Key` and `replay.maxConcurrentPerOrigin`: order is kept per lane (origin
/// plus key), lanes of one origin are delivered side by side up to the bound, and a lane that
/// waits (backoff, queued work) holds back only its own writes.
@Suite("Queue: lanes", .harnessThreads)
struct QueueLaneTests {
    /// Counts the requests the upstream is answering at the same moment. A request counts
    /// from the moment it is read until the handler returns its answer (which the upstream
    /// then writes at once).
    final class InFlight: Sendable {
        private let state = Mutex((now: 0, most: 0))

        /// One more request in flight; returns how many are now.
        func enter() -> Int {
            state.withLock { state in
                state.now += 1
                state.most = max(state.most, state.now)
                return state.now
            }
        }

        func leave() {
            state.withLock { $0.now -= 1 }
        }

        /// The most seen at once.
        var most: Int { state.withLock { $0.most } }
    }

    /// Bodies received for each key (body "key-n"), in arrival order.
    static func bodiesByKey(_ requests: [RecordedRequest]) -> [String: [String]] {
        Dictionary(grouping: requests.map(\.bodyText), by: { String($0.prefix { $0 != "-" }) })
    }

    @Test(arguments: TestStore.both) func threeKeysAreDeliveredTwoLanesAtATime_EachKeyInOrder(store: TestStore) async throws {
        let inFlight = InFlight()
        let twoAtOnce = Gate()
        // Every request is held until two have been in flight together: with one lane at a
        // time the second never comes, the first is held until the gate's wait gives up, and
        // the check on `most` below fails.
        let upstream = try TestUpstream { _ in
            if inFlight.enter() >= 2 { twoAtOnce.open() }
            _ = twoAtOnce.waitBlocking(timeout: .seconds(20))
            inFlight.leave()
            return .respond(.text("created", status: 201))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(
            replay: #""maxConcurrentPerOrigin": 2"#), store: store)

        let keys = ["red", "green", "blue"]
        var queued: [String: [QueuedOperation]] = [:]
        for n in 0..<4 {
            for key in keys {
                queued[key, default: []].append(try outbox.enqueue(
                    body: "\(key)-\(n)", headers: [HeaderField("Outbox-Ordering-Key", key)]))
            }
        }
        try upstream.restart()
        try outbox.drain()
        let received = try await upstream.waitForRequests(12)

        #expect(twoAtOnce.isOpen && inFlight.most >= 2, "never two lanes at once:\n\(outbox)")
        #expect(inFlight.most <= 2, "\(inFlight.most) requests in flight at once with maxConcurrentPerOrigin 2")
        let byKey = Self.bodiesByKey(received)
        for key in keys {
            #expect(byKey[key] == (0..<4).map { "\(key)-\($0)" }, "lane \(key) out of order: \(received.map(\.bodyText))")
        }
        #expect(received.allSatisfy { $0.leakedControlHeaders.isEmpty && $0.attempt == 1 },
                "\(received.map(\.headers))")
        for operation in queued.values.joined() {
            let document = try outbox.operation(operation.id)
            #expect(document.string("status") == "completed", "\(document)")
            #expect(keys.contains(document.string("orderingKey") ?? ""), "\(document)")
        }
        #expect(upstream.requests.count == 12, "duplicates: \(upstream.requests.map(\.bodyText))")
    }

    @Test(arguments: TestStore.both) func writesWithoutAKeyAreOneLane_StrictlyInOrderAndNeverTwoAtOnce(store: TestStore) async throws {
        let inFlight = InFlight()
        let upstream = try TestUpstream { _ in
            _ = inFlight.enter()
            defer { inFlight.leave() }
            return .respond(.text("created", status: 201))
        }
        upstream.stop()
        // The default bound (8) allows many lanes: only the one default lane limits this to one.
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)

        for n in 0..<12 { _ = try outbox.enqueue(body: "n=\(n)") }
        try upstream.restart()
        try outbox.drain()
        let received = try await upstream.waitForRequests(12)

        #expect(received.map(\.bodyText) == (0..<12).map { "n=\($0)" }, "\(outbox)")
        #expect(inFlight.most == 1, "\(inFlight.most) unkeyed writes in flight at once")
    }

    @Test(arguments: TestStore.both) func aKeyBackingOffDoesNotHoldBackAnotherKey_AndFlushWakesIt(store: TestStore) async throws {
        // 500 is retryable but does not mark the origin offline: only lane "a" waits.
        let upstream = try TestUpstream { request in
            request.bodyText == "a-0" && request.attempt == 1 ? .respond(.text("oops", status: 500))
                : .respond(.text("created", status: 201))
        }
        upstream.stop()
        // A 30 s backoff: lane b must finish long before lane a may try again.
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(
            retry: #""maxRetries": 3, "baseDelaySeconds": 30, "multiplier": 1, "jitter": false"#), store: store)

        let a0 = try outbox.enqueue(body: "a-0", headers: [HeaderField("Outbox-Ordering-Key", "a")])
        let a1 = try outbox.enqueue(body: "a-1", headers: [HeaderField("Outbox-Ordering-Key", "a")])
        var b: [QueuedOperation] = []
        for n in 0..<3 { b.append(try outbox.enqueue(body: "b-\(n)", headers: [HeaderField("Outbox-Ordering-Key", "b")])) }
        try upstream.restart()

        for operation in b { _ = try await outbox.waitForOperation(operation.id, toBe: ["completed"]) }
        let waiting = try outbox.operation(a0.id)
        #expect(waiting.string("status") == "pending" && waiting.int("retryCount") == 1, "\(waiting)")
        #expect(try outbox.operation(a1.id).string("status") == "pending", "a-1 overtook its lane's retrying head")
        #expect(upstream.requests.map(\.bodyText).filter { $0.hasPrefix("a-") } == ["a-0"])

        let flush = try outbox.send("POST", "/admin/flush")
        #expect(flush.status == 202, "\(flush)")
        try outbox.drain()
        #expect(upstream.requests.map(\.bodyText).filter { $0.hasPrefix("a-") } == ["a-0", "a-0", "a-1"])
        #expect(try outbox.operation(a1.id).string("status") == "completed")
    }

    @Test(arguments: TestStore.both) func aQueuedKeyHoldsBackOnlyItsOwnWrites_OthersAreForwarded(store: TestStore) async throws {
        let release = Gate()
        let upstream = try TestUpstream { request in
            if request.bodyText == "a-first" {
                return .hold(until: release, then: .respond(.text("first done", status: 201)))
            }
            return .respond(.text("direct", status: 201))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        let keyA = HeaderField("Outbox-Ordering-Key", "a")

        let first = try outbox.enqueue(body: "a-first", headers: [keyA, HeaderField("Outbox-Mode", "queue")])
        try await upstream.waitForRequests(1)
        #expect(try outbox.operation(first.id).string("status") == "inProgress", "the first write is not in flight")
        let metrics = try outbox.admin("metrics")
        #expect(metrics.bodyText.contains("outbox_lanes_active{origin=\"\(upstream.baseURL)\"} 1"), "\(metrics.bodyText)")

        let otherKey = try outbox.send("POST", "/items", body: "b-direct", headers: [HeaderField("Outbox-Ordering-Key", "b")])
        #expect(otherKey.status == 201 && otherKey.bodyText == "direct", "key b was held back by key a:\n\(otherKey)")
        let noKey = try outbox.send("POST", "/items", body: "default-direct")
        #expect(noKey.status == 201 && noKey.bodyText == "direct", "the default lane was held back by key a:\n\(noKey)")
        let sameKey = try outbox.send("POST", "/items", body: "a-second", headers: [keyA])
        #expect(sameKey.status == 202, "a write overtook a queued one of its lane:\n\(sameKey)")

        release.open()
        try outbox.drain()
        let writes = upstream.requests.map(\.bodyText)
        #expect(writes.filter { $0.hasPrefix("a-") } == ["a-first", "a-second"], "\(writes)")
        #expect(Set(writes) == ["a-first", "b-direct", "default-direct", "a-second"], "\(writes)")
        #expect(upstream.requests.allSatisfy { $0.leakedControlHeaders.isEmpty }, "Outbox-Ordering-Key reached the upstream")
    }

    @Test(arguments: [
        ("Outbox-Ordering-Key: a b\r\n", "invalid Outbox-Ordering-Key header value \"a b\""),
        ("Outbox-Ordering-Key: \(String(repeating: "k", count: 256))\r\n", "invalid Outbox-Ordering-Key header value"),
        ("Outbox-Ordering-Key: a\r\nOutbox-Ordering-Key: b\r\n", "Outbox-Ordering-Key header given more than once with different values"),
    ])
    func anInvalidOrderingKeyIsRefusedWith400NamingTheHeader(fields: String, message: String) async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())

        let response = try outbox.exchange("POST /items HTTP/1.1\r\nHost: 127.0.0.1\r\n\(fields)Content-Length: 2\r\n\r\nhi",
                                           method: "POST")
        #expect(response.status == 400, "\(response)")
        let shown = try JSONObject(response).object("error")?.string("message") ?? ""
        #expect(shown.hasPrefix(message), "\(response.bodyText)")
        #expect(upstream.requests.isEmpty, "an invalid request reached the upstream")
        let listed = try JSONObject(outbox.admin("operations"))
        #expect(listed.objects("operations")?.isEmpty == true, "\(listed)")
    }

    @Test(arguments: TestStore.both) func operationsShowTheirOrderingKey_AndTheListFiltersOnIt(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(), store: store)
        // A key with characters that need percent-encoding in a query.
        let odd = "acct&id=7+x"
        let plain = try outbox.enqueue(body: "plain", headers: [HeaderField("Outbox-Ordering-Key", "orders")])
        let unkeyed = try outbox.enqueue(body: "unkeyed")
        let oddOne = try outbox.enqueue(body: "odd", headers: [HeaderField("Outbox-Ordering-Key", odd)])
        let tagged = try outbox.enqueue(body: "tagged", headers: [HeaderField("Outbox-Ordering-Key", "orders"),
                                                                   HeaderField("Outbox-Tag", "t1")])

        #expect(try outbox.operation(plain.id).string("orderingKey") == "orders")
        #expect(try outbox.operation(unkeyed.id).isNull("orderingKey"))
        func listed(_ query: String) throws -> [String] {
            let response = try outbox.admin("operations?" + query)
            #expect(response.status == 200, "\(response)")
            return try JSONObject(response).objects("operations")?.compactMap { $0.string("id") } ?? []
        }
        #expect(try listed("orderingKey=orders") == [plain.id, tagged.id])
        #expect(try listed("orderingKey=orders&tag=t1") == [tagged.id])
        #expect(try listed("orderingKey=orders&status=completed").isEmpty)
        #expect(try listed("orderingKey=orders&origin=\(upstream.baseURL)&limit=1") == [plain.id])
        #expect(try listed("orderingKey=acct%26id%3D7%2Bx") == [oddOne.id])
        #expect(try listed("orderingKey=nobody").isEmpty)
        let all = try JSONObject(outbox.admin("operations")).objects("operations") ?? []
        #expect(all.map { $0.has("orderingKey") } == [true, true, true, true], "\(all)")
        #expect(all.first { $0.string("id") == unkeyed.id }?.isNull("orderingKey") == true)
    }

    @Test(arguments: TestStore.both) func aDependencyInAnotherLaneIsWaitedFor(store: TestStore) async throws {
        // The parent fails once (retried after 0.05 s); the child, in another lane, would go
        // at once on lanes alone.
        let upstream = try TestUpstream { request in
            request.bodyText == "parent" && request.attempt == 1 ? .respond(.text("oops", status: 500))
                : .respond(.text("created", status: 201))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(
            retry: #""maxRetries": 3, "baseDelaySeconds": 0.05, "multiplier": 1, "jitter": false"#), store: store)

        let parent = try outbox.enqueue(body: "parent", headers: [HeaderField("Outbox-Ordering-Key", "p")])
        let child = try outbox.enqueue(body: "child", headers: [
            HeaderField("Outbox-Ordering-Key", "c"), HeaderField("Outbox-Depends-On", parent.id),
        ])
        try upstream.restart()
        try outbox.drain()

        #expect(upstream.requests.map(\.bodyText) == ["parent", "parent", "child"], "\(outbox)")
        #expect(try outbox.operation(child.id).string("status") == "completed")
    }

    @Test(arguments: TestStore.both) func theOrderingKeySurvivesARestart(store: TestStore) async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let home = try TemporaryDirectory()
        let data = home.file("data")
        let config = OutboxProcess.fastQueueConfig()
        let first = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data, store: store)
        let keyed = try first.enqueue(body: "keyed", headers: [HeaderField("Outbox-Ordering-Key", "k-1")])
        let unkeyed = try first.enqueue(body: "unkeyed")
        first.terminate()
        _ = try await first.waitForExit()

        let second = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data, store: store)
        #expect(try second.operation(keyed.id).string("orderingKey") == "k-1")
        #expect(try second.operation(unkeyed.id).isNull("orderingKey"))
        try upstream.restart()
        try second.drain()
        #expect(upstream.requests.map(\.bodyText).sorted() == ["keyed", "unkeyed"])
    }
}

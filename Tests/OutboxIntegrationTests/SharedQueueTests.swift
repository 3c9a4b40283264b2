import Foundation
import Glibc
import Synchronization
import TestPostgres
import Testing

/// Several real `outbox` processes on one PostgreSQL queue (SPEC §9): a key is one operation
/// whichever instance receives it, a lane is delivered by one instance at a time and in order,
/// the lanes of an instance killed mid-drain are taken over within `leaseSeconds` with nothing
/// lost, and instances starting together on an empty schema all start.
@Suite("PostgreSQL store: a fleet on one queue", .harnessThreads, .requires(PostgresServer.isInstalled, PostgresServer.missing))
struct SharedQueueTests {
    /// Runs `first` and `second` on two threads released at the same moment and returns both
    /// results: two clients of two instances racing each other.
    static func simultaneously<T: Sendable>(_ first: @escaping @Sendable () throws -> T,
                                            _ second: @escaping @Sendable () throws -> T) async throws -> (T, T) {
        let start = DispatchSemaphore(value: 0)
        func run(_ body: @escaping @Sendable () throws -> T) async -> Result<T, any Error> {
            await withCheckedContinuation { continuation in
                Thread {
                    start.wait()
                    continuation.resume(returning: Result { try body() })
                }.start()
            }
        }
        async let a = run(first)
        async let b = run(second)
        start.signal()
        start.signal()
        return (try await a.get(), try await b.get())
    }

    /// Two instances, each with its name (`instanceName`), on one new schema.
    static func pair(upstream: String, config: String = OutboxProcess.fastQueueConfig(), leaseSeconds: Double = 10)
        async throws -> (TestStore, OutboxProcess, OutboxProcess) {
        let store = TestStore.postgres(leaseSeconds: leaseSeconds)
        let a = try await OutboxProcess.start(upstream: upstream, config: named(config, "a"), store: store)
        let b = try await OutboxProcess.start(upstream: upstream, config: named(config, "b"), store: store)
        return (store, a, b)
    }

    /// `config` with `queue.postgres.instanceName` set.
    static func named(_ config: String, _ name: String) throws -> String {
        var document = try JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any] ?? [:]
        var queue = document["queue"] as? [String: Any] ?? [:]
        var postgres = queue["postgres"] as? [String: Any] ?? [:]
        postgres["instanceName"] = name
        queue["postgres"] = postgres
        document["queue"] = queue
        return String(decoding: try JSONSerialization.data(withJSONObject: document), as: UTF8.self)
    }

    /// The same key sent to two instances at the same moment, 50 times over: both clients hear
    /// `202` for one operation each time, and the queue holds 50.
    @Test func aKeySentToTwoInstancesAtOnceIsOneOperation_FiftyTimesOver() async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let (_, a, b) = try await Self.pair(upstream: upstream.baseURL)
        for round in 0..<50 {
            let key = HeaderField("Idempotency-Key", "race-\(round)")
            let (first, second) = try await Self.simultaneously({ try a.enqueue(body: "round \(round)", headers: [key]).id },
                                                                { try b.enqueue(body: "round \(round)", headers: [key]).id })
            #expect(first == second, "round \(round): two operations for one key: \(first) and \(second)")
        }
        let listed = try JSONObject(a.admin("operations?limit=1000")).objects("operations") ?? []
        #expect(listed.count == 50, "\(listed.count) operations stored for 50 keys")
        #expect(try JSONObject(b.admin("status")).object("counts")?.int("pending") == 50)
    }

    /// Two instances deliver one queue of eight lanes: each lane's writes arrive in order, never
    /// two of a lane at once, each once; both instances delivered, and each operation names the
    /// instance that did.
    @Test func twoInstancesDeliverOneQueue_EachLaneInOrderNeverTwiceAtOnce() async throws {
        let inFlight = Mutex<[String: Int]>([:])
        let overlaps = Mutex<[String]>([])
        let upstream = try TestUpstream { request in
            let lane = String(request.bodyText.prefix { $0 != "-" })
            let now = inFlight.withLock { map -> Int in
                map[lane, default: 0] += 1
                return map[lane] ?? 0
            }
            if now > 1 { overlaps.withLock { $0.append(request.bodyText) } }
            // A lane's next write may come only after this answer: holding it a little gives an
            // overlap the time to show.
            usleep(2_000)
            inFlight.withLock { $0[lane, default: 1] -= 1 }
            return .respond(.text("created", status: 201))
        }
        upstream.stop()
        let config = OutboxProcess.fastQueueConfig(replay: #""maxConcurrentPerOrigin": 2"#)
        let (_, a, b) = try await Self.pair(upstream: upstream.baseURL, config: config)
        let lanes = (0..<8).map { "lane\($0)" }
        var ids: [String] = []
        for n in 0..<10 {
            for (index, lane) in lanes.enumerated() {
                let via = (n + index) % 2 == 0 ? a : b
                ids.append(try via.enqueue(body: "\(lane)-\(n)", headers: [HeaderField("Outbox-Ordering-Key", lane)]).id)
            }
        }
        try upstream.restart()
        _ = try a.drain(timeoutSeconds: 60)
        let received = try await upstream.waitForRequests(80)

        #expect(overlaps.withLock { $0 }.isEmpty, "a lane had two writes in flight at once: \(overlaps.withLock { $0 })")
        let byLane = Dictionary(grouping: received.map(\.bodyText), by: { String($0.prefix { $0 != "-" }) })
        for lane in lanes {
            #expect(byLane[lane] == (0..<10).map { "\(lane)-\($0)" }, "lane \(lane) out of order or repeated: \(byLane[lane] ?? [])")
        }
        #expect(upstream.requests.count == 80, "\(upstream.requests.count) requests for 80 operations")
        var deliveredBy = Set<String>()
        for id in ids {
            let document = try b.operation(id)
            #expect(document.string("status") == "completed", "\(document)")
            if let instance = document.string("instance") { deliveredBy.insert(instance) }
        }
        #expect(deliveredBy == ["a", "b"], "delivered by \(deliveredBy.sorted()): each instance holds at most 2 of 8 lanes")
    }

    /// `kill -9` of the instance delivering a lane, mid-drain: the other instance resumes the lane
    /// within `leaseSeconds` + 1 s, in order, and every operation completes. What is sent again is
    /// at most the attempt in flight plus 32 whose outcome was not committed, each with a higher
    /// `Outbox-Attempt` than any attempt sent before it (SPEC §4, §9).
    @Test func theLaneOfAKilledInstanceIsResumedByTheOtherWithinItsLease_InOrder_NothingLost() async throws {
        let leaseSeconds = 2.0
        let arrivals = Mutex<[(body: String, at: ContinuousClock.Instant, attempt: Int)]>([])
        let held = Gate()
        let upstream = try TestUpstream { request in
            arrivals.withLock { $0.append((request.bodyText, .now, Int(request.headers["Outbox-Attempt"] ?? "") ?? 0)) }
            // The 20th write is held until the test has killed its sender.
            if request.bodyText == "n=19" && !held.isOpen {
                return .hold(until: held, then: .respond(.text("created", status: 201)))
            }
            return .respond(.text("created", status: 201))
        }
        upstream.stop()
        let store = TestStore.postgres(leaseSeconds: leaseSeconds)
        let a = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.named(OutboxProcess.fastQueueConfig(), "a"),
                                              store: store)
        var ids: [String] = []
        for n in 0..<60 { ids.append(try a.enqueue(body: "n=\(n)").id) }
        try upstream.restart()
        try await upstream.waitForRequests(20)
        // The lane is a's: b starts now and cannot claim it while a's lease is live.
        let b = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.named(OutboxProcess.fastQueueConfig(), "b"),
                                              store: store)
        let before = arrivals.withLock { $0.count }
        a.terminate(signal: SIGKILL)
        let killedAt = ContinuousClock.now
        _ = try await a.waitForExit()
        held.open()
        try await upstream.waitForRequests(before + 1, timeout: .seconds(Int64(leaseSeconds) + 10))
        _ = try b.drain(timeoutSeconds: 60)

        let seen = arrivals.withLock { $0 }
        let resumedAfter = seen[before].at - killedAt
        #expect(resumedAfter < .milliseconds(Int64(leaseSeconds * 1000) + 1000),
                "b resumed the lane \(resumedAfter) after the kill, lease \(leaseSeconds) s")
        print("shared-queue: the lane resumed \(resumedAfter) after kill -9 (leaseSeconds \(leaseSeconds))")
        var firstArrivals: [String] = []
        for arrival in seen where !firstArrivals.contains(arrival.body) { firstArrivals.append(arrival.body) }
        #expect(firstArrivals == (0..<60).map { "n=\($0)" }, "out of order: \(seen.map(\.body))")
        let again = seen.count - 60
        #expect(again <= 33, "\(again) writes sent twice; at most the one in flight and 32 unwritten outcomes may be")
        // The survivor counted an attempt for what the killed instance had taken (its lane's
        // mark): a write sent again is numbered past every attempt of it before.
        var highest: [String: Int] = [:]
        for arrival in seen {
            #expect(arrival.attempt > highest[arrival.body, default: 0],
                    "\(arrival.body) sent as attempt \(arrival.attempt) after attempt \(highest[arrival.body, default: 0])")
            highest[arrival.body] = max(highest[arrival.body, default: 0], arrival.attempt)
        }
        #expect(seen.count > 60, "nothing was sent again: the held write n=19 must be")
        for id in ids {
            #expect(try b.operation(id).string("status") == "completed")
        }
    }

    /// An attempt held by the origin shows as `inProgress` on the instance that does not deliver
    /// it too (its state is written once it has lasted 50 ms), with the instance that does; once
    /// answered, both show it completed.
    @Test func anAttemptInFlightIsShownInProgressByEveryInstance() async throws {
        let release = Gate()
        let upstream = try TestUpstream { _ in .hold(until: release, then: .respond(.text("done", status: 201))) }
        upstream.stop()
        let store = TestStore.postgres()
        let a = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.named(OutboxProcess.fastQueueConfig(), "a"),
                                              store: store)
        let queued = try a.enqueue(body: "held")
        try upstream.restart()
        try await upstream.waitForRequests(1)
        let b = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.named(OutboxProcess.fastQueueConfig(), "b"),
                                              store: store)
        let seen = try await b.waitForOperation(queued.id, describedAs: "inProgress, by a", timeout: .seconds(10)) { document in
            document.string("status") == "inProgress" && document.string("instance") == "a"
        }
        #expect(seen.int("retryCount") == 0)
        release.open()
        _ = try b.drain()
        #expect(try b.operation(queued.id).string("status") == "completed")
        #expect(try a.operation(queued.id).string("status") == "completed")
    }

    /// Three instances starting at the same moment on an empty schema all start: the migration
    /// runs once, under its advisory lock, and the others find it done.
    @Test func instancesStartingTogetherOnAnEmptySchemaAllStart() async throws {
        let upstream = try TestUpstream()
        let store = TestStore.postgres()
        async let a = OutboxProcess.start(upstream: upstream.baseURL, store: store)
        async let b = OutboxProcess.start(upstream: upstream.baseURL, store: store)
        async let c = OutboxProcess.start(upstream: upstream.baseURL, store: store)
        let started = try await [a, b, c]
        for outbox in started {
            let status = try JSONObject(outbox.admin("status"))
            #expect(status.object("store")?.bool("reachable") == true, "\(status)")
            #expect(!outbox.stderrText.contains("error"), "\(outbox)")
        }
    }
}

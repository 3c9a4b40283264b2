import Foundation
import OutboxHTTP
import OutboxModel
import OutboxPostgres
import TestPostgres
import TestPrerequisites
import Testing

/// Operations' rows on a real PostgreSQL server: a request and its state come back as they
/// were written, a key is one operation however many instances add it at once, a state is
/// written only under the lane's claim and only until the operation ends, a lane's next
/// operation follows SPEC §4's order, and the statements that find operations use their
/// indexes on a table of 100 000 rows.
@Suite(.requires(PostgresServer.isInstalled, PostgresServer.missing))
struct PostgresOperationsTests {
    typealias Queue = PostgresLanesTests.Queue

    /// A request with every field set, headers that repeat a name and leave ASCII, a body with
    /// every byte value.
    static func request(_ index: Int, key: String? = nil, lane: String? = "lane-a", priority: OperationPriority = .normal) -> OperationRequest {
        var request = StorageSamples.request(index, bodySize: 300)
        request.headers = [("Host", "api.example.test:8080"), ("X-Note", "zürich \"quoted\" \\ back"), ("X-Note", "second"),
                           ("Content-Type", "application/octet-stream")]
        request.body = (0..<300).map { UInt8(truncatingIfNeeded: $0 &+ index) }
        if let key { request.idempotencyKey = key }
        request.orderingKey = lane
        request.priority = priority
        request.tag = "batch-\(index)"
        request.dependsOn = UUID()
        request.credentials = Array(repeating: 7, count: 32)
        return request
    }

    static func add(_ connection: PostgresConnection, _ request: OperationRequest) throws -> PostgresOperations.Row {
        let statements = PostgresOperations.add(request)
        let results = try connection.pipeline([("BEGIN", [])] + statements.map { ($0.sql, $0.parameters) } + [("COMMIT", [])])
        return try PostgresOperations.summary(results[statements.count], row: 0)
    }

    @Test func anOperationComesBackAsItWasWritten() async throws {
        let queue = try await Queue.make()
        let request = Self.request(1)
        let (added, whole) = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            let added = try Self.add(connection, request)
            let read = try connection.execute(PostgresOperations.whole(request.id).sql, PostgresOperations.whole(request.id).parameters)
            return (added, try PostgresOperations.whole(read, row: 0))
        }
        #expect(added.snapshot == OperationSnapshot(request, state: OperationState()))
        #expect(added.instance == nil)
        #expect(whole.1 == request)
        #expect(whole.0.snapshot.state == OperationState())
    }

    /// The adds of a lane go as one prepared statement of binary arrays (`addMany`): every
    /// field comes back as it was, NULLs and empty values too, and the statement answers how
    /// many rows it stored.
    @Test func addsSentAsOneStatementComeBackAsTheyWereWritten() async throws {
        let queue = try await Queue.make()
        let full = Self.request(1, lane: nil)
        var bare = Self.request(2, lane: nil, priority: .high)
        bare.tag = nil
        bare.dependsOn = nil
        bare.body = []
        bare.credentials = []
        bare.headers = [("Host", "api.example.test:8080")]
        let repeated = Self.request(3, key: full.idempotencyKey, lane: nil)
        let requests = [full, bare]
        let (stored, read) = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            var stored: [String?] = []
            for batch in [requests, [repeated]] {
                let statements = PostgresOperations.addMany(batch)
                let results = try connection.pipeline([("BEGIN", [])] + statements.map { ($0.sql, $0.parameters) } + [("COMMIT", [])])
                stored.append(results[statements.count].value(0, "n"))
            }
            return (stored, try requests.map { request in
                let statement = PostgresOperations.whole(request.id)
                return try PostgresOperations.whole(connection.execute(statement.sql, statement.parameters), row: 0)
            })
        }
        #expect(stored == ["2", "0"], "a key already held stores nothing")
        #expect(read.map(\.1) == requests)
        #expect(read.map(\.0.snapshot.state) == [OperationState(), OperationState()])
    }

    /// Two instances add the same key at the same moment, 50 times over: one row each time, both
    /// are answered with it, and only the winner's lane counts it.
    @Test func aKeyAddedByTwoInstancesAtOnceIsOneOperation() async throws {
        let queue = try await Queue.make()
        for round in 0..<50 {
            let start = DispatchSemaphore(value: 0)
            let adders = (0..<2).map { number in
                queue.started { connection in
                    // Other lanes, so neither waits for the other's lane row: they meet at the key's index.
                    let request = Self.request(round * 2 + number, key: "race-\(round)", lane: "lane-\(number)")
                    start.wait()
                    return try Self.add(connection, request).snapshot.id
                }
            }
            start.signal()
            start.signal()
            let winners = [try await adders[0].value.get(), try await adders[1].value.get()]
            #expect(winners[0] == winners[1], "round \(round)")
        }
        let (rows, counted) = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            return (try connection.execute("SELECT count(*) FROM operations").rows[0][0],
                    try connection.execute("SELECT sum(unfinished) FROM lanes").rows[0][0])
        }
        #expect(rows == "50")
        #expect(counted == "50")
    }

    @Test func aStateIsWrittenOnlyUnderTheLanesClaimAndOnlyUntilTheOperationEnds() async throws {
        let queue = try await Queue.make()
        let request = Self.request(2)
        let outcome = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            _ = try Self.add(connection, request)
            let claim = try #require(try PostgresLanes.claim(connection, origin: request.origin.description, holder: "run-1",
                                                             leaseSeconds: 30, limit: 1).first)
            func record(_ state: OperationState, holder: String = "run-1", fence: Int64? = nil) throws -> Int {
                let statement = PostgresOperations.record(request.id, state, priority: request.priority, instance: "one",
                                                          holder: holder, fence: fence ?? claim.fence)[0]
                return try connection.execute(statement.sql, statement.parameters).affected
            }
            let started = try record(OperationState(status: .inProgress, lastAttemptAt: 1_000, attempts: 1))
            let byAnother = try record(OperationState(status: .failed, attempts: 1), holder: "run-2")
            let withOldFence = try record(OperationState(status: .failed, attempts: 1), fence: claim.fence - 1)
            let response = StoredResponse(status: 201, headers: [("Content-Type", "application/json")], body: Array("{\"ok\":true}".utf8))
            let finished = try record(OperationState(status: .completed, lastAttemptAt: 2_000, response: response, attempts: 1))
            let afterTheEnd = try record(OperationState(status: .failed, attempts: 2))
            let read = try PostgresOperations.whole(connection.execute(PostgresOperations.whole(request.id).sql,
                                                                       PostgresOperations.whole(request.id).parameters), row: 0)
            let counted = try connection.execute("SELECT unfinished, (SELECT finished_at FROM operations) AS finished FROM lanes")
            return (started, byAnother, withOldFence, finished, afterTheEnd, read.0, counted.rows[0], response)
        }
        let (started, byAnother, withOldFence, finished, afterTheEnd, row, counted, response) = outcome
        #expect([started, byAnother, withOldFence, finished, afterTheEnd] == [1, 0, 0, 1, 0] as [Int])
        #expect(row.snapshot.state == OperationState(status: .completed, lastAttemptAt: 2_000, response: response, attempts: 1))
        #expect(row.instance == "one")
        #expect(counted == ["0", "2000"])
    }

    /// SPEC §4's order within a lane: the highest priority first, first in first out within
    /// one; once attempted, an operation stays the head whatever arrives.
    @Test func aLanesNextOperationFollowsPriorityAndKeepsItsAttemptedHead() async throws {
        let queue = try await Queue.make()
        let low = Self.request(10, priority: .low)
        let normal = Self.request(11, priority: .normal)
        let high = Self.request(12, priority: .high)
        let laterHigh = Self.request(13, priority: .high)
        let critical = Self.request(14, priority: .critical)
        let order = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            func next() throws -> UUID? {
                let statement = PostgresOperations.nextInLane(origin: low.origin, orderingKey: "lane-a")
                let result = try connection.execute(statement.sql, statement.parameters)
                return result.rows.isEmpty ? nil : try PostgresOperations.summary(result, row: 0).snapshot.id
            }
            var seen: [UUID?] = []
            for request in [low, normal, high, laterHigh] { _ = try Self.add(connection, request) }
            seen.append(try next())
            let claim = try #require(try PostgresLanes.claim(connection, origin: low.origin.description, holder: "h",
                                                             leaseSeconds: 30, limit: 1).first)
            let attempt = PostgresOperations.record(high.id, OperationState(status: .pending, nextAttemptAt: 9_000, attempts: 1),
                                                    priority: high.priority, instance: "i", holder: "h", fence: claim.fence)[0]
            try connection.execute(attempt.sql, attempt.parameters)
            _ = try Self.add(connection, critical)
            seen.append(try next())
            let done = PostgresOperations.record(high.id, OperationState(status: .failed, attempts: 1),
                                                 priority: high.priority, instance: "i", holder: "h", fence: claim.fence)[0]
            try connection.execute(done.sql, done.parameters)
            seen.append(try next())
            return seen
        }
        #expect(order == [high.id, high.id, critical.id])
    }

    /// The plans of the statements that find operations, on 100 000 rows of which 1 % are
    /// pending (a long retained history): each reads through the index made for it, none scans
    /// the table or sorts what it found (so a page stops after its rows).
    @Test func findingAnOperationUsesAnIndexNeverAScan() async throws {
        let queue = try await Queue.make()
        let plans = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            try connection.execute("""
                WITH added AS (
                    INSERT INTO requests (id, origin, lane, idempotency_key, fingerprint, credentials, method, target, headers, body,
                                          priority, created_at)
                    SELECT gen_random_uuid(), 'http://o' || (i % 10) || '.test:80', 'k' || (i % 100), 'key-' || i, '\\x00', '\\x',
                           'POST', '/', '[]', '\\x', i % 4, i
                      FROM generate_series(1, 100000) AS i
                    RETURNING seq, origin, lane, priority, created_at)
                INSERT INTO states (seq, origin, lane, status, lane_rank, finished_at)
                SELECT seq, origin, lane, CASE WHEN created_at % 100 = 3 THEN 'pending' ELSE 'completed' END, priority,
                       CASE WHEN created_at % 100 = 3 THEN NULL ELSE created_at END
                  FROM added
                """)
            try connection.execute("ANALYZE requests")
            try connection.execute("ANALYZE states")
            let origin = Origin(scheme: .http, host: "o3.test", port: 80)
            let statements: [(String, PostgresOperations.Statement)] = [
                ("requests_key", PostgresOperations.byKey("key-4242", origin: origin)),
                ("states_lane_next", PostgresOperations.nextInLane(origin: origin, orderingKey: "k3")),
                ("states_status", PostgresOperations.list(status: .pending, afterSeq: 50_000, limit: 100)),
                // The store's own: the proxy's question and a lane's operations taken ahead.
                ("requests_key", PostgresOperations.keyHolder("key-4242", origin: origin)),
                // The status poll's look at what this instance has in flight.
                ("requests_id_key", PostgresOperations.pendingAmong([UUID(), UUID(), UUID()])),
                ("states_lane_next", PostgresOperations.takeAhead(origin: origin.description, lane: "k3", excluding: [7],
                                                                      limit: 64, holder: "h", fence: 1)),
            ]
            // A batch of fenced states, which reads the rows it changes by their unique index
            // (and sorts the few lanes it locks), and the maintenance sweeps, which run every
            // second on every instance: expiry looks at the oldest pending operations only,
            // retention at the finished ones by age.
            let retention = PostgresOperations.retention(cutoff: 1_000)
            let sweeps: [(String, PostgresOperations.Statement)] = [
                ("requests_id_key", PostgresOperations.recordMany([
                    PostgresOperations.StateWrite(id: UUID(), state: OperationState(status: .completed, lastAttemptAt: 1, attempts: 1),
                                                  priority: .normal, instance: "i", holder: "h", fence: 1),
                    PostgresOperations.StateWrite(id: UUID(), state: OperationState(status: .pending, nextAttemptAt: 9, attempts: 1),
                                                  priority: .normal, instance: "i", holder: "h", fence: 1),
                ])[0]),
                ("states_status", PostgresOperations.expire(cutoff: 1_000, limit: 1000, now: 2_000_000)),
                ("states_finished_at", PostgresOperations.remove(retention, until: Int64.max, limit: 1000)),
            ]
            let explain = { (index: String, statement: PostgresOperations.Statement) throws -> (String, String) in
                (index, try connection.execute("EXPLAIN (FORMAT JSON) " + statement.sql, statement.parameters).rows[0][0] ?? "")
            }
            return (try statements.map(explain), try sweeps.map(explain))
        }
        for (index, plan) in plans.0 {
            let nodes = try Self.planNodes(plan)
            #expect(!nodes.contains { $0.type == "Seq Scan" || $0.type == "Sort" }, "\(index): \(plan)")
            #expect(nodes.contains { $0.index == index }, "\(index) not used: \(plan)")
            // Nor does it combine its index with a broad one (every pending operation's entries).
            #expect(!nodes.contains { $0.type == "BitmapAnd" }, "\(index): \(plan)")
        }
        for (index, plan) in plans.1 {
            let nodes = try Self.planNodes(plan)
            // Their own small results may be grouped or sorted; the table is never scanned.
            #expect(!nodes.contains { $0.type == "Seq Scan" && ["requests", "states"].contains($0.relation) }, "\(index): \(plan)")
            #expect(nodes.contains { $0.index == index }, "\(index) not used: \(plan)")
        }
    }

    /// Every node of an `EXPLAIN (FORMAT JSON)` plan: its type and the index it reads, if any.
    static func planNodes(_ text: String) throws -> [(type: String, index: String?, relation: String?)] {
        func walk(_ node: JSON) -> [(type: String, index: String?, relation: String?)] {
            guard case .object(let members) = node else { return [] }
            let type = members.first { $0.key == "Node Type" }?.value.stringValue ?? ""
            let index = members.first { $0.key == "Index Name" }?.value.stringValue
            let relation = members.first { $0.key == "Relation Name" }?.value.stringValue
            let children = members.first { $0.key == "Plans" }?.value.arrayValue ?? []
            return [(type, index, relation)] + children.flatMap(walk)
        }
        let document = try JSONReader.parse(Array(text.utf8))
        return (document.arrayValue ?? []).flatMap { entry -> [(type: String, index: String?, relation: String?)] in
            guard case .object(let members) = entry, let plan = members.first(where: { $0.key == "Plan" })?.value else { return [] }
            return walk(plan)
        }
    }
}

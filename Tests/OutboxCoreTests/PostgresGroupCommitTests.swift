import Foundation
import OutboxPostgres
import Synchronization
import TestPostgres
import TestPrerequisites
import Testing

/// Group commit on a real PostgreSQL server: writes that wait while a transaction is on its way
/// share the next one (seen in the rows' transaction ids), a write's statements are never split
/// across transactions, its completion comes after its `COMMIT` (its rows are visible to another
/// connection by then), one failing write fails alone, and a broken connection reports failure
/// to every write of its batch, none of which committed.
@Suite(.requires(PostgresServer.isInstalled, PostgresServer.missing))
struct PostgresGroupCommitTests {
    /// The completions of `count` writes, by write number, awaited without blocking the pool.
    final class Completions: Sendable {
        private let results = Mutex<[Int: Result<[PostgresResult], PostgresError>]>([:])
        private let group = DispatchGroup()

        init(_ count: Int) { for _ in 0..<count { group.enter() } }

        func record(_ number: Int) -> PostgresGroupCommit.Completion {
            { [self] result in
                results.withLock { $0[number] = result }
                group.leave()
            }
        }

        /// Every result, once all have come (or what came within 30 s).
        func all() async -> [Int: Result<[PostgresResult], PostgresError>] {
            _ = await ThreadResult { [group] in group.wait(timeout: .now() + 30) }.value
            return results.withLock { $0 }
        }
    }

    /// A thread on a fresh schema whose work is held back until `release`: writes made before
    /// then wait together, as writes that arrive during a slow commit do.
    final class Held: Sendable {
        let thread: PostgresThread
        let gate = DispatchSemaphore(value: 0)
        let backend = Mutex<Int?>(nil)
        /// Signalled once `backend` holds the held job's backend pid.
        let backendKnown = DispatchSemaphore(value: 0)

        init(_ server: PostgresServer, schema: String) {
            thread = PostgresThread(conninfo: server.conninfo(schema: schema))
            thread.submit { [self] connection in
                let pid = try? connection.get().execute("SELECT pg_backend_pid() AS pid").value(0, "pid")
                backend.withLock { $0 = pid.flatMap { Int($0) } }
                backendKnown.signal()
                gate.wait()
            }
        }

        func release() { gate.signal() }
    }

    private static func setUp(_ sql: String...) async throws -> (PostgresServer, String) {
        try await PostgresServer.onThread { server in
            let schema = try server.makeSchema()
            let connection = try PostgresConnection(server.conninfo(schema: schema))
            defer { connection.close() }
            for statement in sql { try connection.execute(statement) }
            return (server, schema)
        }
    }

    private static func query(_ server: PostgresServer, _ schema: String, _ sql: String) async throws -> PostgresResult {
        try await PostgresServer.onThread { _ in
            let connection = try PostgresConnection(server.conninfo(schema: schema))
            defer { connection.close() }
            return try connection.execute(sql)
        }
    }

    @Test func writesThatWaitTogetherShareOneTransaction() async throws {
        let (server, schema) = try await Self.setUp("CREATE TABLE t (writer int PRIMARY KEY, xid bigint)")
        let held = Held(server, schema: schema)
        defer { held.thread.stop() }
        let commits = Mutex<[Int]>([])
        let group = PostgresGroupCommit(thread: held.thread) { writes, _ in commits.withLock { $0.append(writes) } }
        let completions = Completions(200)
        for writer in 0..<200 {
            group.write([("INSERT INTO t VALUES ($1, txid_current())", [.int64(Int64(writer))])], completion: completions.record(writer))
        }
        held.release()
        let results = await completions.all()
        #expect(results.count == 200)
        #expect(results.values.allSatisfy { (try? $0.get())?.first?.affected == 1 })
        let rows = try await Self.query(server, schema, "SELECT count(*) AS n, count(DISTINCT xid) AS transactions FROM t")
        #expect(rows.value(0, "n") == "200")
        #expect(rows.value(0, "transactions") == "1")
        #expect(commits.withLock { $0 } == [200])
    }

    @Test func aTransactionHoldsAtMostItsStatementsAndNeverSplitsAWrite() async throws {
        let (server, schema) = try await Self.setUp("CREATE TABLE a (writer int PRIMARY KEY, xid bigint)",
                                                    "CREATE TABLE b (writer int PRIMARY KEY, xid bigint)")
        let held = Held(server, schema: schema)
        defer { held.thread.stop() }
        let commits = Mutex<[Int]>([])
        // 51 statements at most: 25 writes of two statements fit, the 26th waits for the next.
        let group = PostgresGroupCommit(thread: held.thread, maxStatements: 51) { writes, _ in commits.withLock { $0.append(writes) } }
        let completions = Completions(200)
        for writer in 0..<200 {
            group.write([("INSERT INTO a VALUES ($1, txid_current())", [.int64(Int64(writer))]),
                         ("INSERT INTO b VALUES ($1, txid_current())", [.int64(Int64(writer))])],
                        completion: completions.record(writer))
        }
        held.release()
        let results = await completions.all()
        #expect(results.values.allSatisfy { (try? $0.get())?.count == 2 })
        #expect(commits.withLock { $0 } == Array(repeating: 25, count: 8))
        let rows = try await Self.query(server, schema, """
            SELECT count(*) AS n, count(DISTINCT a.xid) AS transactions, count(*) FILTER (WHERE a.xid <> b.xid) AS split
              FROM a JOIN b USING (writer)
            """)
        #expect(rows.value(0, "n") == "200")
        #expect(rows.value(0, "transactions") == "8")
        #expect(rows.value(0, "split") == "0")
    }

    /// Each completion looks from a connection of its own: its write is already visible.
    @Test func aWriteIsCompletedOnlyAfterItsCommit() async throws {
        let (server, schema) = try await Self.setUp("CREATE TABLE t (writer int PRIMARY KEY)")
        let observer = try await PostgresServer.onThread { server in
            PostgresConnection.Sendable(try PostgresConnection(server.conninfo(schema: schema)))
        }
        defer { observer.connection.close() }
        let thread = PostgresThread(conninfo: server.conninfo(schema: schema))
        defer { thread.stop() }
        let group = PostgresGroupCommit(thread: thread)
        let seen = Mutex<[Int: String]>([:])
        let completions = Completions(40)
        for writer in 0..<40 {
            let record = completions.record(writer)
            group.write([("INSERT INTO t VALUES ($1)", [.int64(Int64(writer))])]) { result in
                // Completions run one after another on the database thread: the observer is used by one at a time.
                let visible = try? observer.connection.execute("SELECT count(*) AS n FROM t WHERE writer = $1", [.int64(Int64(writer))])
                seen.withLock { $0[writer] = visible?.value(0, "n") ?? "error" }
                record(result)
            }
        }
        let results = await completions.all()
        #expect(results.values.allSatisfy { (try? $0.get()) != nil })
        #expect(seen.withLock { $0 } == Dictionary(uniqueKeysWithValues: (0..<40).map { ($0, "1") }))
    }

    @Test func aWriteThatFailsFailsAloneAndTheOthersCommit() async throws {
        let (server, schema) = try await Self.setUp("CREATE TABLE t (id int PRIMARY KEY)", "INSERT INTO t VALUES (1000)")
        let held = Held(server, schema: schema)
        defer { held.thread.stop() }
        let group = PostgresGroupCommit(thread: held.thread)
        let completions = Completions(10)
        for writer in 0..<10 {
            let id = writer == 5 ? 1000 : writer
            group.write([("INSERT INTO t VALUES ($1)", [.int64(Int64(id))])], completion: completions.record(writer))
        }
        held.release()
        let results = await completions.all()
        for writer in 0..<10 where writer != 5 { #expect((try? results[writer]?.get()) != nil, "write \(writer): \(String(describing: results[writer]))") }
        guard case .failure(let error)? = results[5] else { Issue.record("the duplicate was committed: \(String(describing: results[5]))"); return }
        #expect(error.sqlState == "23505")
        let rows = try await Self.query(server, schema, "SELECT count(*) AS n FROM t")
        #expect(rows.value(0, "n") == "10")
    }

    /// Two instances' transactions lock the same two lane rows, which their writes name in
    /// opposite orders, each write lingering after its lock: sorted by `lockOrder`, both take
    /// the first row first, so one waits for the other instead of deadlocking (the database's
    /// deadlock count stays as it was).
    @Test func transactionsTakeSharedRowsInOneOrderAndNeverDeadlock() async throws {
        let (server, schema) = try await Self.setUp("CREATE TABLE lanes (name text PRIMARY KEY, n int NOT NULL)",
                                                    "INSERT INTO lanes VALUES ('a', 0), ('b', 0)")
        let deadlocks = "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        let before = try await Self.query(server, schema, deadlocks).rows[0][0]
        let instances = [Held(server, schema: schema), Held(server, schema: schema)]
        defer { for held in instances { held.thread.stop() } }
        let completions = Completions(4)
        for (number, held) in instances.enumerated() {
            let group = PostgresGroupCommit(thread: held.thread)
            for lane in number == 0 ? ["a", "b"] : ["b", "a"] {
                group.write([("UPDATE lanes SET n = n + 1 WHERE name = $1", [.text(lane)]), ("SELECT pg_sleep(0.3)", [])],
                            lockOrder: lane, completion: completions.record(number * 2 + (lane == "a" ? 0 : 1)))
            }
        }
        for held in instances { held.release() }
        let results = await completions.all()
        #expect(results.count == 4)
        #expect(results.values.allSatisfy { (try? $0.get()) != nil }, "\(results)")
        let after = try await Self.query(server, schema, deadlocks).rows[0][0]
        #expect(after == before)
        let counts = try await Self.query(server, schema, "SELECT string_agg(n::text, ',' ORDER BY name) AS n FROM lanes")
        #expect(counts.value(0, "n") == "2,2")
    }

    /// The batch's connection is cut before it commits: every write of the batch fails as a
    /// connection failure and none is in the table; the next write reconnects and commits.
    @Test func aBrokenConnectionFailsItsBatchAndTheNextWriteReconnects() async throws {
        let (server, schema) = try await Self.setUp("CREATE TABLE t (writer int PRIMARY KEY)")
        let held = Held(server, schema: schema)
        defer { held.thread.stop() }
        let group = PostgresGroupCommit(thread: held.thread)
        let completions = Completions(10)
        for writer in 0..<10 { group.write([("INSERT INTO t VALUES ($1)", [.int64(Int64(writer))])], completion: completions.record(writer)) }
        // The held job has read its backend's pid before it blocks; cut that backend.
        let pid = try await PostgresServer.onThread { _ -> Int? in
            _ = held.backendKnown.wait(timeout: .now() + 20)
            return held.backend.withLock { $0 }
        }
        let cut = try await Self.query(server, schema, "SELECT pg_terminate_backend(\(try #require(pid))) AS cut")
        #expect(cut.value(0, "cut") == "t")
        held.release()
        let results = await completions.all()
        #expect(results.count == 10)
        #expect(results.values.allSatisfy { if case .failure(let error) = $0 { error.isConnectionFailure } else { false } }, "\(results)")
        let after = Completions(1)
        group.write([("INSERT INTO t VALUES (99)", [])], completion: after.record(0))
        #expect((try? await after.all()[0]?.get()) != nil)
        let rows = try await Self.query(server, schema, "SELECT string_agg(writer::text, ',') AS writers FROM t")
        #expect(rows.value(0, "writers") == "99")
    }

    /// Adds that wait together share one transaction and, per lane, one set of statements:
    /// every operation is stored once in arrival order (`seq`), each lane counts what was
    /// inserted, and each add hears the holder of its key (a key repeated within the batch, or
    /// stored before it, is the first request's operation).
    @Test func addsOfALaneThatWaitTogetherShareTheirStatements() async throws {
        let (server, schema) = try await PostgresServer.onThread { server in
            let schema = try server.makeSchema()
            let connection = try PostgresConnection(server.conninfo)
            defer { connection.close() }
            _ = try PostgresSchema.migrate(connection, schema: schema)
            return (server, schema)
        }
        let earlier = PostgresOperationsTests.request(100, key: "stored-before", lane: "a")
        _ = try await PostgresServer.onThread { _ in
            let connection = try PostgresConnection(server.conninfo(schema: schema))
            defer { connection.close() }
            return try PostgresOperationsTests.add(connection, earlier)
        }
        let held = Held(server, schema: schema)
        defer { held.thread.stop() }
        let commits = Mutex<[Int]>([])
        let group = PostgresGroupCommit(thread: held.thread) { writes, _ in commits.withLock { $0.append(writes) } }
        // 30 adds over two lanes, one repeating a key of the batch and one a key stored before.
        var requests = (0..<30).map { PostgresOperationsTests.request($0, key: "key-\($0)", lane: $0 % 3 == 0 ? "b" : "a") }
        requests.append(PostgresOperationsTests.request(30, key: "key-4", lane: "a"))
        requests.append(PostgresOperationsTests.request(31, key: "stored-before", lane: "a"))
        let holders = Mutex<[Int: Result<PostgresGroupCommit.Added, PostgresError>]>([:])
        let done = DispatchGroup()
        for (number, request) in requests.enumerated() {
            done.enter()
            group.add(request) { result in
                holders.withLock { $0[number] = result }
                done.leave()
            }
        }
        held.release()
        _ = await ThreadResult { done.wait(timeout: .now() + 30) }.value
        let answers = holders.withLock { $0 }
        #expect(commits.withLock { $0 } == [requests.count], "the adds did not share one transaction: \(commits.withLock { $0 })")
        func holder(_ number: Int) -> UUID? {
            switch answers[number] {
            case .success(.stored)?: requests[number].id
            case .success(.holder(let rows))? where !rows.rows.isEmpty: (try? PostgresOperations.summary(rows, row: 0))?.snapshot.id
            default: nil
            }
        }
        for number in 0..<30 { #expect(holder(number) == requests[number].id, "add \(number)") }
        #expect(holder(30) == requests[4].id, "a key repeated in the batch is the first request's operation")
        #expect(holder(31) == earlier.id, "a key stored before is that operation")
        // Arrival order is kept within each lane (the batch runs lane by lane, locked in order).
        for lane in ["a", "b"] {
            let rows = try await Self.query(server, schema, "SELECT id::text AS id FROM operations WHERE lane = '\(lane)' ORDER BY seq")
            let stored = rows.rows.compactMap { $0[0].flatMap { UUID(uuidString: $0) } }
            let expected = (lane == "a" ? [earlier.id] : []) + requests.prefix(30).filter { $0.orderingKey == lane }.map(\.id)
            #expect(stored == expected, "lane \(lane) not stored once each in arrival order")
        }
        let lanes = try await Self.query(server, schema, "SELECT lane, unfinished FROM lanes ORDER BY lane")
        #expect(lanes.rows.map { $0.compactMap { $0 } } == [["a", "21"], ["b", "10"]], "\(lanes.rows)")
    }
}

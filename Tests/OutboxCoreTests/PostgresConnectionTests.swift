import Foundation
import OutboxPostgres
import Synchronization
import TestPostgres
import TestPrerequisites
import Testing

/// The libpq client against a real PostgreSQL server (`PostgresServer`): values survive the
/// round trip byte for byte, a pipeline commits its statements together or not at all, every
/// wait is bounded, and the database thread reconnects after its connection was cut. Blocking
/// calls run on threads of their own (`ThreadResult`), never on Swift's cooperative pool.
@Suite(.requires(PostgresServer.isInstalled, PostgresServer.missing))
struct PostgresConnectionTests {
    /// Runs `body` on a thread of its own with a connection to a fresh schema of the server.
    private func withSchema<T: Sendable>(_ body: @escaping @Sendable (PostgresServer, String) throws -> T) async throws -> T {
        try await PostgresServer.onThread { server in try body(server, try server.makeSchema()) }
    }

    @Test func valuesComeBackAsTheyWereSent() async throws {
        let body: [UInt8] = (0..<1024).map { UInt8(truncatingIfNeeded: $0 &* 7) } + [0, 0, 255]
        let row = try await withSchema { server, schema in
            let connection = try PostgresConnection(server.conninfo(schema: schema))
            defer { connection.close() }
            try connection.execute("CREATE TABLE t (body bytea, name text, n bigint, empty bytea, missing text)")
            try connection.execute("INSERT INTO t VALUES ($1, $2, $3, $4, $5)",
                                   [.bytes(body), .text("zürich 'quoted' \\ back"), .int64(-9_007_199_254_740_993), .bytes([]), .null])
            return try connection.execute("SELECT body, name, n, empty, missing FROM t")
        }
        #expect(row.rows.count == 1)
        #expect(row.bytes(0, "body") == body)
        #expect(row.value(0, "name") == "zürich 'quoted' \\ back")
        #expect(row.value(0, "n") == "-9007199254740993")
        #expect(row.bytes(0, "empty") == [])
        #expect(row.value(0, "missing") == nil)
    }

    /// A result asked for in binary reads as the same result in text: every type the binary
    /// reader knows, at its extremes, NULLs, and a type it does not know (read as NULL).
    @Test func aBinaryResultReadsAsTheTextOneDoes() async throws {
        let body: [UInt8] = (0..<1024).map { UInt8(truncatingIfNeeded: $0 &* 7) } + [0, 0, 255]
        let (text, binary) = try await withSchema { server, schema in
            let connection = try PostgresConnection(server.conninfo(schema: schema))
            defer { connection.close() }
            let select = """
                SELECT $1::bytea AS body, ''::bytea AS empty, 'zürich "q" \\ x'::text AS name, 'v'::varchar AS short,
                       n2::smallint AS n2, n4::integer AS n4, n8::bigint AS n8, flag, '0198f2a4-7c1e-7abc-8def-0123456789ab'::uuid AS id,
                       '[["A","b"],["C","ü"]]'::jsonb AS headers, NULL::text AS missing, NULL::bytea AS gone
                  FROM (VALUES (-32768, -2147483648, -9223372036854775808, true), (32767, 2147483647, 9223372036854775807, false),
                               (0, -1, -1, true)) AS v(n2, n4, n8, flag)
                """
            return (try connection.execute(select, [.bytes(body)]), try connection.execute(select, [.bytes(body)], binary: true))
        }
        #expect(text.rows.count == 3)
        #expect(binary.columns == text.columns)
        #expect(binary.rows == text.rows)
        for row in 0..<3 {
            #expect(binary.bytes(row, "body") == body)
            #expect(binary.bytes(row, "empty") == [])
            #expect(binary.bytes(row, "gone") == nil)
        }
        #expect(binary.value(0, "n8") == "-9223372036854775808" && binary.value(1, "n4") == "2147483647")
        #expect(binary.value(2, "id") == "0198f2a4-7c1e-7abc-8def-0123456789ab")
        let other = try await withSchema { server, schema in
            let connection = try PostgresConnection(server.conninfo(schema: schema))
            defer { connection.close() }
            return try connection.execute("SELECT 1.5::numeric AS n, 'x'::text AS t", binary: true)
        }
        #expect(other.value(0, "n") == nil, "numeric is not read in binary")
        #expect(other.value(0, "t") == "x")
    }

    /// A statement run planned once is planned for any values the first time and never again,
    /// on a connection that plans every other execution for its values (as the store's do); it
    /// answers as a planned-each-time one does, and leaves no transaction open.
    @Test func aStatementRunPlannedOnceIsNotPlannedForItsValuesAgain() async throws {
        let (plans, answers, open) = try await withSchema { server, schema in
            let connection = try PostgresConnection(server.conninfo(schema: schema))
            defer { connection.close() }
            try connection.execute("SET plan_cache_mode = force_custom_plan")
            try connection.execute("CREATE TABLE t (k text PRIMARY KEY, n int)")
            try connection.execute("INSERT INTO t SELECT 'k' || i, i FROM generate_series(1, 100) i")
            let custom = "SELECT n FROM t WHERE k = $1", once = "SELECT n + 0 AS n FROM t WHERE k = $1"
            var answers: [String?] = []
            for key in ["k1", "k2", "k3"] {
                answers.append(try connection.execute(custom, [.text(key)]).value(0, "n"))
                answers.append(try connection.executePlannedOnce(once, [.text(key)]).value(0, "n"))
            }
            let plans = try connection.execute("""
                SELECT statement = $1 AS once, generic_plans, custom_plans FROM pg_prepared_statements
                 WHERE statement IN ($1, $2) ORDER BY 1
                """, [.text(once), .text(custom)]).rows.map { $0.compactMap { $0 }.joined(separator: "/") }
            return (plans, answers, connection.inTransaction)
        }
        #expect(plans == ["f/0/3", "t/3/0"], "each execution planned for its values, and the other planned once")
        #expect(answers == ["1", "1", "2", "2", "3", "3"])
        #expect(!open)
    }

    @Test func aPipelineCommitsItsStatementsTogether() async throws {
        let (results, visible, transactions) = try await withSchema { server, schema in
            let connection = try PostgresConnection(server.conninfo(schema: schema))
            defer { connection.close() }
            try connection.execute("CREATE TABLE t (id int PRIMARY KEY, body bytea)")
            var statements: [(String, [PostgresValue])] = [("BEGIN", [])]
            for id in 0..<100 {
                statements.append(("INSERT INTO t VALUES ($1, $2)", [.int64(Int64(id)), .bytes([UInt8](repeating: 1, count: 1024))]))
            }
            statements.append(("COMMIT", []))
            let results = try connection.pipeline(statements)
            // Seen from another session: committed, every row by the same transaction (xmin).
            let other = try PostgresConnection(server.conninfo(schema: schema))
            defer { other.close() }
            let seen = try other.execute("SELECT count(*) AS n, count(DISTINCT xmin::text) AS transactions FROM t")
            return (results.count, seen.value(0, "n"), seen.value(0, "transactions"))
        }
        #expect(results == 102)
        #expect(visible == "100")
        #expect(transactions == "1")
    }

    @Test func aFailedStatementRollsTheWholePipelineBack() async throws {
        let (error, count, usable) = try await withSchema { server, schema in
            let connection = try PostgresConnection(server.conninfo(schema: schema))
            defer { connection.close() }
            try connection.execute("CREATE TABLE t (id int PRIMARY KEY)")
            var caught: PostgresError?
            do {
                _ = try connection.pipeline([("BEGIN", []), ("INSERT INTO t VALUES (1)", []), ("INSERT INTO t VALUES (1)", []),
                                         ("INSERT INTO t VALUES (2)", []), ("COMMIT", [])])
            } catch let error as PostgresError { caught = error }
            let count = try connection.execute("SELECT count(*) AS n FROM t").value(0, "n")
            return (caught, count, connection.isOpen)
        }
        #expect(error?.sqlState == "23505")
        #expect(count == "0")
        #expect(usable)
    }

    @Test func aStatementThatHangsFailsAtTheDeadline() async throws {
        let (error, seconds) = try await withSchema { server, schema in
            let connection = try PostgresConnection(server.conninfo(schema: schema), timeoutSeconds: 0.5)
            let started = Date()
            var caught: PostgresError?
            do { try connection.execute("SELECT pg_sleep(30)") } catch let error as PostgresError { caught = error }
            return (caught, Date().timeIntervalSince(started))
        }
        #expect(error?.isConnectionFailure == true)
        #expect(error?.message.contains("within 0.5 s") == true, "\(String(describing: error))")
        #expect(seconds >= 0.5 && seconds < 10)
    }

    @Test func theServersStatementTimeoutIsReportedByItsSQLState() async throws {
        let error = try await withSchema { server, schema -> PostgresError? in
            let connection = try PostgresConnection(server.conninfo(schema: schema))
            defer { connection.close() }
            try connection.execute("SET statement_timeout = '100ms'")
            do { try connection.execute("SELECT pg_sleep(30)") } catch let error as PostgresError { return error }
            return nil
        }
        #expect(error?.sqlState == "57014")
        #expect(error?.isConnectionFailure == false)
    }

    @Test func aRefusedConnectionFailsWithoutAnSQLState() async throws {
        let error = await ThreadResult { () -> PostgresError? in
            // Port 1 on loopback: nothing listens there.
            do throws(PostgresError) {
                _ = try PostgresConnection("host=127.0.0.1 port=1 user=outbox dbname=postgres", timeoutSeconds: 5)
            } catch {
                return error
            }
            return nil
        }.value
        #expect(error?.isConnectionFailure == true)
        #expect(error?.message.contains("127.0.0.1") == true, "\(String(describing: error))")
    }

    @Test func theDatabaseThreadReconnectsAfterItsConnectionWasCut() async throws {
        let (server, schema) = try await withSchema { server, schema in (server, schema) }
        let thread = PostgresThread(conninfo: server.conninfo(schema: schema), timeoutSeconds: 5)
        defer { thread.stop() }
        let first = try await thread.run { try $0.execute("SELECT pg_backend_pid() AS pid").value(0, "pid") }
        // Cut it from another session, as a server restart or a network fault would.
        let killed = await ThreadResult { () -> Bool in
            guard let other = try? PostgresConnection(server.conninfo), let first else { return false }
            defer { other.close() }
            return (try? other.execute("SELECT pg_terminate_backend($1) AS ok", [.text(first)]).value(0, "ok")) == "t"
        }.value
        #expect(killed)
        // The next job finds the connection broken and fails; the one after it reconnects.
        var second: String?
        for _ in 0..<2 where second == nil {
            second = try? await thread.run { try $0.execute("SELECT pg_backend_pid() AS pid").value(0, "pid") }
        }
        #expect(second != nil && second != first)
    }

    @Test func jobsOnTheDatabaseThreadRunOneAtATime() async throws {
        let (server, schema) = try await withSchema { server, schema in (server, schema) }
        let thread = PostgresThread(conninfo: server.conninfo(schema: schema), timeoutSeconds: 5)
        defer { thread.stop() }
        _ = try await thread.run { try $0.execute("CREATE TABLE t (n int)") }
        let overlap = Overlap()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<20 {
                group.addTask {
                    try await thread.run { connection in
                        overlap.enter()
                        defer { overlap.leave() }
                        try connection.execute("INSERT INTO t VALUES ($1)", [.int64(Int64(n))])
                    }
                }
            }
            try await group.waitForAll()
        }
        let count = try await thread.run { try $0.execute("SELECT count(*) AS n FROM t").value(0, "n") }
        #expect(count == "20")
        #expect(overlap.most == 1)
    }
}

/// How many jobs were inside at once, at most.
private final class Overlap: Sendable {
    private let state = Mutex((inside: 0, most: 0))
    func enter() { state.withLock { $0.inside += 1; $0.most = max($0.most, $0.inside) } }
    func leave() { state.withLock { $0.inside -= 1 } }
    var most: Int { state.withLock { $0.most } }
}

/// A connection string described without its secrets, as logs, status and `check-config` show
/// it, read by libpq's own parser from both of its forms.
struct PostgresTargetTests {
    @Test(arguments: [
        "postgresql://outbox:s3cr%40t-pw@db.internal:6432/queue?sslmode=require",
        "host=db.internal port=6432 dbname=queue user=outbox password='s3cr@t-pw' sslmode=require",
    ])
    func aTargetNamesHostPortDatabaseAndUserButNeverThePassword(_ conninfo: String) throws {
        let target = try PostgresTarget(conninfo: conninfo)
        #expect(target.description == "host db.internal, port 6432, database queue, user outbox")
        #expect(target.hasPassword)
        #expect(!"\(target)".contains("s3cr"))
    }

    @Test func whatTheStringLeavesOutIsLeftToLibpq() throws {
        let target = try PostgresTarget(conninfo: "postgresql:///queue")
        #expect(target.description == "database queue")
        #expect(!target.hasPassword)
        #expect(try PostgresTarget(conninfo: "").description == "libpq defaults")
    }

    @Test(arguments: ["host=db password='unterminated", "postgresql://outbox:pw@db/queue?bogus=1", "mysql://outbox:pw@db/queue"])
    func anUnparsableStringIsRefusedWithoutQuotingIt(_ conninfo: String) {
        let error = #expect(throws: PostgresTarget.Unparsable.self) { try PostgresTarget(conninfo: conninfo) }
        #expect(error.map { !"\($0)".contains("pw") && !"\($0)".contains("unterminated") } == true)
    }
}

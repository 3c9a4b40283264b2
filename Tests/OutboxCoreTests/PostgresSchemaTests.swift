import Foundation
import OutboxPostgres
import TestPostgres
import TestPrerequisites
import Testing

/// The queue's schema on a real PostgreSQL server: created where it is missing, migrated once
/// when several instances start together, left alone when a newer binary migrated it, rolled
/// back whole when a step fails, and usable by a role that may not create schemas.
@Suite(.requires(PostgresServer.isInstalled, PostgresServer.missing))
struct PostgresSchemaTests {
    /// A schema name no other test uses (the server's schemas are shared by the whole run).
    private static func freshName(_ prefix: String = "m") -> String {
        prefix + "_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
    }

    private static func tables(_ connection: PostgresConnection, _ schema: String) throws -> [String] {
        try connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename", [.text(schema)])
            .rows.compactMap { $0[0] }
    }

    @Test func aMissingSchemaIsCreatedAndMigratedAndASecondRunChangesNothing() async throws {
        let latest = PostgresSchema.latestVersion
        let (first, second, tables, rows) = try await PostgresServer.onThread { server in
            let connection = try PostgresConnection(server.conninfo)
            defer { connection.close() }
            let schema = Self.freshName()
            let first = try PostgresSchema.migrate(connection, schema: schema)
            let second = try PostgresSchema.migrate(connection, schema: schema)
            let rows = try connection.execute("SELECT version, name FROM \(schema).outbox_migrations ORDER BY version")
            return (first, second, try Self.tables(connection, schema), rows.rows.map { "\($0[0] ?? "")/\($0[1] ?? "")" })
        }
        #expect(latest >= 1)
        #expect(first == PostgresSchema.Migrated(from: 0, to: latest))
        #expect(second == PostgresSchema.Migrated(from: latest, to: latest))
        #expect(tables == ["lanes", "outbox_migrations", "requests", "states", "status_counts"])
        #expect(rows == PostgresSchema.migrations.map { "\($0.version)/\($0.name)" })
    }

    /// Schema v3 keeps the number of operations in each status as statements change them: a
    /// schema upgraded from v2 starts from the rows it holds, and inserts (one and many, a key
    /// already held), updates of a status and of other columns only, and deletes, from several
    /// connections, keep the counts equal to a count of the table.
    @Test func statusCountsAreKeptByEveryChange() async throws {
        let (kept, counted, upgraded) = try await PostgresServer.onThread { server in
            let schema = Self.freshName("counts")
            let connection = try PostgresConnection(server.conninfo(schema: schema))
            defer { connection.close() }
            _ = try PostgresSchema.migrate(connection, schema: schema, migrations: Array(PostgresSchema.migrations.prefix(2)))
            // Rows as version 2 kept them, in one table (version 6 moves their states out).
            try connection.execute("""
                INSERT INTO operations (id, origin, lane, idempotency_key, fingerprint, credentials, method, target, headers, body,
                                        priority, created_at, status, lane_rank)
                SELECT gen_random_uuid(), 'http://o', '', key, '\\x00', '\\x', 'POST', '/', '[]', '\\x', 1, 0,
                       CASE key WHEN 'c' THEN 'failed' ELSE 'pending' END, 1
                  FROM unnest(ARRAY['a', 'b', 'c']) AS key
                """)
            _ = try PostgresSchema.migrate(connection, schema: schema)
            let counts = "SELECT status || '=' || n FROM (\(PostgresOperations.countsByStatus.sql)) c ORDER BY 1"
            let upgraded = try connection.execute(counts).rows.compactMap { $0[0] }

            let other = try PostgresConnection(server.conninfo(schema: schema))
            defer { other.close() }
            try PostgresLanesTests.inTransaction(other, PostgresLanesTests.add(origin: "http://o", lane: "k", key: "a"))
            try PostgresLanesTests.inTransaction(other, PostgresLanesTests.add(origin: "http://o", lane: "k", key: "d"))
            let many = PostgresOperations.addMany((0..<5).map { PostgresOperationsTests.request($0, key: "many-\($0)", lane: "m") })
            try PostgresLanesTests.inTransaction(other, many)
            func ofKeys(_ keys: String) -> String { "seq IN (SELECT seq FROM requests WHERE idempotency_key IN (\(keys)))" }
            try connection.execute("UPDATE states SET status = 'completed' WHERE " + ofKeys("'a', 'many-1', 'many-2'"))
            try other.execute("UPDATE states SET attempts = attempts + 1 WHERE status = 'pending'")
            try other.execute("UPDATE states SET status = 'inProgress' WHERE " + ofKeys("'many-3'"))
            try connection.execute("WITH gone AS (DELETE FROM states WHERE \(ofKeys("'b', 'many-1'")) RETURNING seq) "
                                   + "DELETE FROM requests WHERE seq IN (SELECT seq FROM gone)")
            let kept = try connection.execute(counts).rows.compactMap { $0[0] }
            let counted = try connection.execute("SELECT status || '=' || count(*) FROM operations GROUP BY status ORDER BY 1")
                .rows.compactMap { $0[0] }
            return (kept, counted, upgraded)
        }
        #expect(upgraded == ["failed=1", "pending=2"])
        #expect(kept == counted)
        #expect(counted == ["completed=2", "failed=1", "inProgress=1", "pending=3"])
    }

    /// Three instances that start at the same moment: each waits on the schema's advisory lock
    /// (seen in `pg_locks` while a fourth connection holds it), then one migrates and the other
    /// two find the work done. Without the lock they would not wait, and the losers of the race
    /// to `CREATE SCHEMA` would fail.
    @Test func instancesStartingTogetherMigrateOnce() async throws {
        let schema = Self.freshName("race")
        let server = try await PostgresServer.onThread { $0 }
        let holder = try await PostgresServer.onThread { server -> PostgresConnection.Sendable in
            let connection = try PostgresConnection(server.conninfo)
            try connection.execute("BEGIN")
            try connection.execute("SELECT pg_advisory_xact_lock($1::int, hashtext($2))", [.int64(PostgresSchema.lockClass), .text(schema)])
            return PostgresConnection.Sendable(connection)
        }
        let migrators = (0..<3).map { _ in
            ThreadResult { () -> Result<PostgresSchema.Migrated, PostgresSchema.SchemaError> in
                do throws(PostgresError) {
                    let connection = try PostgresConnection(server.conninfo)
                    defer { connection.close() }
                    return Result { () throws(PostgresSchema.SchemaError) in try PostgresSchema.migrate(connection, schema: schema) }
                } catch {
                    return .failure(.database(error))
                }
            }
        }
        let waiting = try await PostgresServer.onThread { _ in
            try holder.connection.waitFor(waiters: 3, onLockOf: schema)
        }
        #expect(waiting == 3)
        try await PostgresServer.onThread { _ in
            try holder.connection.execute("COMMIT")
            holder.connection.close()
        }
        var outcomes: [PostgresSchema.Migrated] = []
        for migrator in migrators { outcomes.append(try await migrator.value.get()) }
        let latest = PostgresSchema.latestVersion
        #expect(outcomes.filter { $0.from == 0 }.count == 1, "\(outcomes)")
        #expect(outcomes.filter { $0.from == latest }.count == 2, "\(outcomes)")
        let versions = try await PostgresServer.onThread { server in
            let connection = try PostgresConnection(server.conninfo)
            defer { connection.close() }
            return try connection.execute("SELECT count(*) AS n FROM \(schema).outbox_migrations").value(0, "n")
        }
        #expect(versions == String(PostgresSchema.migrations.count))
    }

    @Test func aSchemaANewerOutboxMigratedIsRefusedAndLeftAsItWas() async throws {
        let latest = PostgresSchema.latestVersion
        let (error, version) = try await PostgresServer.onThread { server in
            let connection = try PostgresConnection(server.conninfo)
            defer { connection.close() }
            let schema = Self.freshName()
            _ = try PostgresSchema.migrate(connection, schema: schema)
            try connection.execute("INSERT INTO \(schema).outbox_migrations (version, name) VALUES ($1, 'from the future')",
                                   [.int64(Int64(latest + 1))])
            var caught: PostgresSchema.SchemaError?
            do throws(PostgresSchema.SchemaError) { _ = try PostgresSchema.migrate(connection, schema: schema) } catch { caught = error }
            return (caught, try PostgresSchema.version(connection, schema: schema))
        }
        guard case .newer(_, let found, let known) = error else { Issue.record("expected .newer, got \(String(describing: error))"); return }
        #expect(found == latest + 1)
        #expect(known == latest)
        let text = error.map { "\($0)" } ?? ""
        #expect(text.contains("version \(latest + 1)") && text.contains("up to \(latest)"), "\(text)")
        #expect(version == latest + 1)
    }

    @Test func aFailingStepRollsBackTheWholeMigrationSchemaIncluded() async throws {
        let good = PostgresSchema.Migration(version: 1, name: "good", sql: "CREATE TABLE a (x int); CREATE TABLE b (y int);")
        let bad = PostgresSchema.Migration(version: 2, name: "bad", sql: "CREATE TABLE c (z int); CREATE TABLE oops (;")
        let (error, exists) = try await PostgresServer.onThread { server in
            let connection = try PostgresConnection(server.conninfo)
            defer { connection.close() }
            let schema = Self.freshName()
            var caught: PostgresSchema.SchemaError?
            do throws(PostgresSchema.SchemaError) { _ = try PostgresSchema.migrate(connection, schema: schema, migrations: [good, bad]) } catch { caught = error }
            let exists = try connection.execute("SELECT count(*) AS n FROM pg_namespace WHERE nspname = $1", [.text(schema)])
            return (caught, exists.value(0, "n"))
        }
        guard case .database(let failure) = error else { Issue.record("expected .database, got \(String(describing: error))"); return }
        #expect(failure.sqlState == "42601")
        #expect(exists == "0")
    }

    /// A migration that runs longer than a statement may on the instances' connections (a copy
    /// of a large queue's rows, here a two-second sleep against a bound of one second on the
    /// server and for the client) completes: a migration has a bound of its own.
    @Test func aMigrationMayRunLongerThanAStatement() async throws {
        let slow = PostgresSchema.Migration(version: 1, name: "slow", sql: "SELECT pg_sleep(2); CREATE TABLE a (x int);")
        let (migrated, tables) = try await PostgresServer.onThread { server in
            let connection = try PostgresConnection(server.conninfo, timeoutSeconds: 1)
            defer { connection.close() }
            try connection.execute("SET statement_timeout = '1s'")
            let schema = Self.freshName()
            let migrated = try PostgresSchema.migrate(connection, schema: schema, migrations: [slow])
            return (migrated, try Self.tables(connection, schema))
        }
        #expect(migrated == PostgresSchema.Migrated(from: 0, to: 1))
        #expect(tables == ["a", "outbox_migrations"])
    }

    /// A role that may not create schemas migrates one an administrator made for it; asked to
    /// create one, it gets PostgreSQL's permission error, not a half-made schema.
    @Test func aRoleWithoutCreateMigratesTheSchemaMadeForIt() async throws {
        let (migrated, refused) = try await PostgresServer.onThread { server in
            let admin = try PostgresConnection(server.conninfo)
            defer { admin.close() }
            let role = Self.freshName("role")
            let schema = Self.freshName()
            try admin.execute("CREATE ROLE \(role) LOGIN")
            try admin.execute("CREATE SCHEMA \(schema) AUTHORIZATION \(role)")
            let limited = try PostgresConnection("host=127.0.0.1 port=\(server.port) user=\(role) dbname=postgres connect_timeout=5")
            defer { limited.close() }
            let migrated = try PostgresSchema.migrate(limited, schema: schema)
            var refused: PostgresSchema.SchemaError?
            do throws(PostgresSchema.SchemaError) { _ = try PostgresSchema.migrate(limited, schema: Self.freshName()) } catch { refused = error }
            return (migrated, refused)
        }
        #expect(migrated == PostgresSchema.Migrated(from: 0, to: PostgresSchema.latestVersion))
        guard case .database(let failure) = refused else { Issue.record("expected .database, got \(String(describing: refused))"); return }
        #expect(failure.sqlState == "42501")
    }

    @Test func namesAreQuotedWholeAndUnusableOnesRefused() async throws {
        let odd = "Outbox \"prod\"; DROP SCHEMA public -- 1"
        let (tables, empty, long) = try await PostgresServer.onThread { server in
            let connection = try PostgresConnection(server.conninfo)
            defer { connection.close() }
            _ = try PostgresSchema.migrate(connection, schema: odd)
            let tables = try Self.tables(connection, odd)
            var empty: PostgresSchema.SchemaError?
            do throws(PostgresSchema.SchemaError) { _ = try PostgresSchema.migrate(connection, schema: "") } catch { empty = error }
            var long: PostgresSchema.SchemaError?
            do throws(PostgresSchema.SchemaError) { _ = try PostgresSchema.migrate(connection, schema: String(repeating: "s", count: 64)) } catch { long = error }
            try connection.execute("DROP SCHEMA \(PostgresSchema.quoted(odd)) CASCADE")
            return (tables, empty, long)
        }
        #expect(tables == ["lanes", "outbox_migrations", "requests", "states", "status_counts"])
        #expect(empty == .invalidName(""))
        #expect(long == .invalidName(String(repeating: "s", count: 64)))
        #expect(PostgresSchema.isValidName(String(repeating: "s", count: 63)))
    }

    /// The list the binary applies and the files in `Migrations/` say the same: one file per
    /// version, `vNNN_name.sql`, in order, none forgotten in `Package.swift`'s resources.
    @Test func everyMigrationFileIsInTheListInOrder() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/OutboxPostgres/Migrations")
        let files = try FileManager.default.contentsOfDirectory(atPath: sources.path).filter { $0.hasSuffix(".sql") }.sorted()
        let listed = PostgresSchema.migrations.map { String(format: "v%03d_%@.sql", $0.version, $0.name) }
        #expect(files == listed)
        #expect(PostgresSchema.migrations.map(\.version) == Array(1...PostgresSchema.migrations.count))
        for (file, migration) in zip(files, PostgresSchema.migrations) {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            #expect(text == migration.sql, "\(file) differs from what the binary applies")
        }
        let package = try String(contentsOf: sources.deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Package.swift"), encoding: .utf8)
        for file in files { #expect(package.contains("\"Migrations/\(file)\""), "\(file) is not a resource in Package.swift") }
    }
}

extension PostgresConnection {
    /// A connection handed from one test thread to another, used by one at a time.
    struct Sendable: @unchecked Swift.Sendable {
        let connection: PostgresConnection
        init(_ connection: PostgresConnection) { self.connection = connection }
    }

    /// Waits (bounded, looking once more after the deadline) until `sql`'s first value reaches
    /// `count`, and returns the last value it read: for states of other sessions that no event
    /// announces (who waits for which lock).
    func waitUntil(_ sql: String, _ parameters: [PostgresValue] = [], reaches count: Int, seconds: Double = 20) throws -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let result = try execute(sql, parameters)
            let value = result.rows.first?.first.flatMap { $0.flatMap { Int($0) } } ?? 0
            if value >= count || Date() > deadline { return value }
            usleep(10_000)
        }
    }

    /// Waits until `count` sessions wait for the migration lock of `schema`; returns how many do.
    func waitFor(waiters count: Int, onLockOf schema: String) throws -> Int {
        try waitUntil("""
            SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND classid = $1::bigint AND objid::bigint = (hashtext($2)::bigint + 4294967296) % 4294967296
            """, [.int64(PostgresSchema.lockClass), .text(schema)], reaches: count)
    }

    /// Waits until `count` sessions named `application` (libpq's `application_name`, one per
    /// test, since the server is shared) wait for a lock; returns how many do.
    func waitFor(lockWaiters count: Int, application: String) throws -> Int {
        try waitUntil("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = $1",
                      [.text(application)], reaches: count)
    }
}

/// The queue's tables in the schema Outbox owns, created and brought up to date at start and by
/// `outbox migrate` (SPEC §9). Migrations are SQL files in `Migrations/`, compiled into the
/// binary and applied in version order inside one transaction that first takes an advisory lock
/// named after the schema: instances starting at the same moment wait for each other, and the
/// second finds the work done. A schema a newer binary migrated further is never touched.
public enum PostgresSchema {
    /// One step of the schema: `sql` brings version `version - 1` to `version`.
    public struct Migration: Sendable {
        public let version: Int
        public let name: String
        public let sql: String

        package init(version: Int, name: String, sql: String) {
            self.version = version
            self.name = name
            self.sql = sql
        }
    }

    /// Every migration this binary knows, oldest first; the file names in `Migrations/` say the
    /// same (a test checks that both agree).
    public static let migrations: [Migration] = [
        Migration(version: 1, name: "queue", sql: String(decoding: PackageResources.v001_queue_sql, as: UTF8.self)),
        Migration(version: 2, name: "lane_pokes", sql: String(decoding: PackageResources.v002_lane_pokes_sql, as: UTF8.self)),
        Migration(version: 3, name: "status_counts", sql: String(decoding: PackageResources.v003_status_counts_sql, as: UTF8.self)),
        Migration(version: 4, name: "lane_marks", sql: String(decoding: PackageResources.v004_lane_marks_sql, as: UTF8.self)),
        Migration(version: 5, name: "lane_mark_arrivals",
                  sql: String(decoding: PackageResources.v005_lane_mark_arrivals_sql, as: UTF8.self)),
        Migration(version: 6, name: "states", sql: String(decoding: PackageResources.v006_states_sql, as: UTF8.self)),
    ]

    /// The longest one migration may run, on the server and for the client: long enough to copy
    /// the rows of a queue of millions (version 6 copies every operation's state), bounded so
    /// that a migration stuck behind a lock ends and is tried again.
    public static let migrationTimeoutSeconds: Double = 600

    /// The version this binary migrates a schema to.
    public static var latestVersion: Int { migrations.last?.version ?? 0 }

    /// What a migration did: the schema's version before and after.
    public struct Migrated: Sendable, Equatable {
        public let from: Int
        public let to: Int

        public init(from: Int, to: Int) {
            self.from = from
            self.to = to
        }
    }

    /// Why a schema was not migrated.
    public enum SchemaError: Error, Equatable, CustomStringConvertible {
        /// A newer Outbox migrated the schema past what this one knows: running against it
        /// could misread rows, so this binary refuses.
        case newer(schema: String, found: Int, known: Int)
        case invalidName(String)
        case database(PostgresError)

        public var description: String {
            switch self {
            case .newer(let schema, let found, let known):
                "schema \"\(schema)\" is at version \(found), newer than this outbox knows (up to \(known)): run a newer outbox"
            case .invalidName(let name):
                "schema name \"\(name)\" must be 1 to 63 bytes without NUL"
            case .database(let error):
                "\(error)"
            }
        }
    }

    /// Locks of this kind are Outbox's own: the first key of `pg_advisory_xact_lock(int, int)`
    /// ("OBX1"), the second the schema's `hashtext`. Two schemas that share a hash only wait
    /// for each other.
    package static let lockClass: Int64 = 0x4F42_5831

    /// Creates `schema` when it is missing and applies the migrations it lacks, in one
    /// transaction. The schema may exist already (made by an administrator for a role that may
    /// not create schemas).
    public static func migrate(_ connection: PostgresConnection, schema: String) throws(SchemaError) -> Migrated {
        try migrate(connection, schema: schema, migrations: migrations)
    }

    /// `migrate` with another list of migrations: the tests' way to make one fail.
    package static func migrate(_ connection: PostgresConnection, schema: String,
                                migrations: [Migration]) throws(SchemaError) -> Migrated {
        guard isValidName(schema) else { throw .invalidName(schema) }
        let latestVersion = migrations.last?.version ?? 0
        let name = quoted(schema)
        do {
            let found = try connection.pipeline([
                ("BEGIN", []),
                // A migration that copies every operation (version 6) runs as long as the queue
                // is large; the instances' connections bound a statement at 10 s.
                ("SET LOCAL statement_timeout = '\(Int(migrationTimeoutSeconds))s'", []),
                ("SELECT pg_advisory_xact_lock($1::int, hashtext($2))", [.int64(lockClass), .text(schema)]),
                ("SELECT count(*) AS n FROM pg_namespace WHERE nspname = $1", [.text(schema)]),
            ])
            var steps: [(String, [PostgresValue])] = []
            if found[3].value(0, "n") == "0" { steps.append(("CREATE SCHEMA \(name)", [])) }
            steps += [
                ("SET LOCAL search_path TO \(name)", []),
                ("""
                 CREATE TABLE IF NOT EXISTS outbox_migrations (
                     version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                 """, []),
                ("SELECT coalesce(max(version), 0) AS version FROM outbox_migrations", []),
            ]
            let results = try connection.pipeline(steps)
            let current = Int(results.last?.value(0, "version") ?? "") ?? 0
            guard current <= latestVersion else {
                try connection.execute("ROLLBACK")
                throw SchemaError.newer(schema: schema, found: current, known: latestVersion)
            }
            for migration in migrations where migration.version > current {
                try connection.executeScript(migration.sql, timeoutSeconds: migrationTimeoutSeconds)
                try connection.execute("INSERT INTO outbox_migrations (version, name) VALUES ($1, $2)",
                                       [.int64(Int64(migration.version)), .text(migration.name)])
            }
            try connection.execute("COMMIT")
            return Migrated(from: current, to: latestVersion)
        } catch let error as SchemaError {
            throw error
        } catch let error as PostgresError {
            if connection.inTransaction { _ = try? connection.execute("ROLLBACK") }
            throw .database(error)
        } catch {
            throw .database(PostgresError(sqlState: nil, message: "\(error)"))
        }
    }

    /// The schema's version, 0 when it or its migrations table does not exist yet.
    public static func version(_ connection: PostgresConnection, schema: String) throws(SchemaError) -> Int {
        guard isValidName(schema) else { throw .invalidName(schema) }
        do {
            let exists = try connection.execute("SELECT to_regclass($1) IS NOT NULL AS present",
                                                [.text(quoted(schema) + ".outbox_migrations")])
            guard exists.value(0, "present") == "t" else { return 0 }
            let result = try connection.execute("SELECT coalesce(max(version), 0) AS version FROM \(quoted(schema)).outbox_migrations")
            return Int(result.value(0, "version") ?? "") ?? 0
        } catch {
            throw .database(error)
        }
    }

    /// A name PostgreSQL keeps whole (NAMEDATALEN is 64, with the terminator) and libpq can
    /// carry (a C string).
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 63 && !name.utf8.contains(0)
    }

    /// `name` as a quoted identifier: any characters, case kept (`"Outbox"` is not `outbox`).
    public static func quoted(_ name: String) -> String {
        var text = "\""
        for character in name { text += character == "\"" ? "\"\"" : String(character) }
        return text + "\""
    }
}

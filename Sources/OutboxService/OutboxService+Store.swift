import Foundation
import OutboxConfig
import OutboxModel
import OutboxPostgres
import OutboxQueue
import OutboxStorage
import OutboxTelemetry

extension OutboxService {
    /// The queue's store for `config`: the local log in `dataDirectory`, or the PostgreSQL
    /// database several instances share (SPEC §9). A log that cannot be opened is a runtime
    /// failure (exit 1); a schema a newer Outbox migrated is refused like a bad config (exit 2).
    /// A database that does not answer is no failure: the store starts unavailable and
    /// reconnects by itself.
    static func openStore(config: OutboxConfig, reachability: Reachability, logger: Logger, metrics: Metrics,
                          events: EventHub) throws(ServiceSetupError) -> any QueueStore {
        switch config.queue.store {
        case .local:
            do {
                return try OutboxQueue(config: config, reachability: reachability, logger: logger, metrics: metrics, events: events)
            } catch {
                throw ServiceSetupError("cannot open the queue in \(config.dataDirectory): \(error)", exitCode: 1)
            }
        case .postgres:
            do {
                let store = try PostgresQueue(config: config, reachability: reachability, logger: logger, metrics: metrics,
                                              events: events)
                logger.info("store", ["kind": "postgres", "database": store.target, "schema": config.queue.postgres.schema,
                                      "instance": store.instance])
                return store
            } catch {
                throw ServiceSetupError("queue.postgres: \(error)", exitCode: 2)
            }
        }
    }

    /// What `check-config` prints: the effective config, a database password as `[set]`.
    public static func effectiveConfigJSON(_ config: OutboxConfig) -> String {
        config.effectiveJSON(showingURL: PostgresTarget.shown)
    }

    /// `outbox migrate`: creates or migrates the PostgreSQL store's schema and returns the line
    /// to print. A database that fails is exit 1, a config without the store or a schema a newer
    /// Outbox migrated exit 2; the messages name host, port and database, never the password.
    public static func migrate(config: OutboxConfig) throws(ServiceSetupError) -> String {
        guard config.queue.store == .postgres, let url = config.queue.postgres.url else {
            throw ServiceSetupError("migrate: queue.store is not \"postgres\" (the local store needs no migration)", exitCode: 2)
        }
        let target = (try? PostgresTarget(conninfo: url).description) ?? "an unparsable connection string"
        let schema = config.queue.postgres.schema
        let connection: PostgresConnection
        do {
            connection = try PostgresConnection(url, timeoutSeconds: 10)
        } catch {
            throw ServiceSetupError("migrate: cannot connect to database \(target): \(error)", exitCode: 1)
        }
        defer { connection.close() }
        do {
            let migrated = try PostgresSchema.migrate(connection, schema: schema)
            if migrated.from == migrated.to {
                return "schema \"\(schema)\" in database \(target) is at version \(migrated.to), the latest this outbox knows"
            }
            return "schema \"\(schema)\" in database \(target) migrated from version \(migrated.from) to \(migrated.to)"
        } catch .newer(let name, let found, let known) {
            throw ServiceSetupError("migrate: " + PostgresSchema.SchemaError.newer(schema: name, found: found, known: known).description,
                                    exitCode: 2)
        } catch {
            throw ServiceSetupError("migrate: database \(target): \(error)", exitCode: 1)
        }
    }
}

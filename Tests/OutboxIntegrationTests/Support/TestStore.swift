import Foundation
import TestPostgres
import TestPrerequisites
import Testing

/// Where a test's `outbox` keeps its queue: the data directory (`local`), or a schema of the
/// test process's PostgreSQL server (`postgres`), the same one for every instance started with
/// the same value, so that several processes share one queue. The queue's behaviour tests take
/// both (`TestStore.both`): the same assertions hold on either store (SPEC §9).
enum TestStore: Sendable, CustomTestStringConvertible {
    case local
    case postgres(schema: String, leaseSeconds: Double)

    /// Both stores, each with a schema of its own for the test that takes it. Without
    /// PostgreSQL's server only the local one, unless CI=true (where a missing server fails the
    /// postgres arm, since a CI run skips nothing).
    static var both: [TestStore] {
        PostgresServer.isInstalled || Prerequisite.isStrict ? [.local, .postgres()] : [.local]
    }

    /// `both`, the postgres one with claims that lapse after `leaseSeconds`: for a test that
    /// restarts a killed instance, which takes its own lanes over once their lease lapsed.
    static func both(leaseSeconds: Double) -> [TestStore] {
        both.map { $0.isPostgres ? .postgres(leaseSeconds: leaseSeconds) : $0 }
    }

    /// A new schema on the shared server (created by the first `outbox` that opens it).
    static func postgres(leaseSeconds: Double = 10) -> TestStore {
        .postgres(schema: "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""), leaseSeconds: leaseSeconds)
    }

    var testDescription: String {
        switch self {
        case .local: "local store"
        case .postgres: "postgres store"
        }
    }

    var isPostgres: Bool {
        if case .postgres = self { return true }
        return false
    }

    /// The server the postgres store's instances share, started by the first test that needs it.
    static func server() async throws -> PostgresServer {
        try await PostgresServer.blocking { try PostgresServer.shared() }
    }

    /// `config` (JSON text, or none) with this store's keys merged into its `queue` object.
    func applied(to config: String?) async throws -> String? {
        guard case .postgres(let schema, let leaseSeconds) = self else { return config }
        let server = try await Self.server()
        var document: [String: Any] = [:]
        if let config {
            guard let parsed = try JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any] else {
                throw HarnessError("the test's config is not a JSON object: \(config)")
            }
            document = parsed
        }
        var queue = document["queue"] as? [String: Any] ?? [:]
        queue["store"] = "postgres"
        var postgres = queue["postgres"] as? [String: Any] ?? [:]
        postgres["url"] = server.conninfo
        postgres["schema"] = schema
        if postgres["leaseSeconds"] == nil { postgres["leaseSeconds"] = leaseSeconds }
        queue["postgres"] = postgres
        document["queue"] = queue
        return String(decoding: try JSONSerialization.data(withJSONObject: document), as: UTF8.self)
    }
}

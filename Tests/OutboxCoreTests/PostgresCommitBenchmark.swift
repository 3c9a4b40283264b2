import Foundation
import OutboxModel
import OutboxPostgres
import Synchronization
import TestPostgres
import TestPrerequisites
import Testing

/// The PostgreSQL store's write path at the storage level (no HTTP: `Benchmarks/postgres.sh`
/// measures `outbox serve`), run large with
/// `OUTBOX_POSTGRES_BENCH_SECONDS=10 swift test -c release -Xswiftc -enable-testing --filter PostgresCommitBenchmark`:
/// 64 clients, each adding one operation with a 1 KiB body and waiting for its commit before the
/// next (as wrk's 64 connections wait for their `202`s), through `PostgresGroupCommit` on
/// `OUTBOX_POSTGRES_BENCH_CONNECTIONS` connections (default 1), for
/// `OUTBOX_POSTGRES_BENCH_SECONDS`, alternated with `pgbench` inserting one 1 KiB row per
/// transaction at 64 clients on the same private cluster: what group commit gains over one
/// row per commit, both waiting on the same WAL flush. In the suite it runs small (512 adds,
/// no pgbench), so CI skips nothing: every add is committed once, and fewer transactions than
/// adds carry them.
@Suite(.requires(PostgresServer.isInstalled, PostgresServer.missing))
struct PostgresCommitBenchmark {
    static let environment = ProcessInfo.processInfo.environment
    static var seconds: Double? { environment["OUTBOX_POSTGRES_BENCH_SECONDS"].flatMap(Double.init) }
    static var connections: Int { environment["OUTBOX_POSTGRES_BENCH_CONNECTIONS"].flatMap { Int($0) } ?? 1 }
    static var rounds: Int { environment["OUTBOX_POSTGRES_BENCH_ROUNDS"].flatMap { Int($0) } ?? 2 }

    /// Adds made by 64 closed-loop clients until `limit` adds or `seconds` pass; returns adds,
    /// transactions and elapsed seconds.
    static func groupCommitArm(_ server: PostgresServer, schema: String, limit: Int?, seconds: Double?) -> (Int, Int, Double) {
        let threads = (0..<connections).map { _ in PostgresThread(conninfo: server.conninfo(schema: schema)) }
        let transactions = Atomic(0)
        let committers = threads.map { PostgresGroupCommit(thread: $0) { _, _ in transactions.add(1, ordering: .relaxed) } }
        defer { for thread in threads { thread.stop() } }
        let origin = Origin(scheme: .http, host: "127.0.0.1", port: 9000)
        let body = [UInt8](repeating: 0x61, count: 1024)
        let started = DispatchTime.now().uptimeNanoseconds
        let deadline = seconds.map { started + UInt64($0 * 1e9) }
        let done = Atomic(0)
        let issued = Atomic(0)
        let finished = DispatchGroup()
        let failures = Atomic(0)
        @Sendable func next(_ client: Int) {
            let number = issued.add(1, ordering: .relaxed).oldValue
            if let limit, number >= limit { finished.leave(); return }
            if let deadline, DispatchTime.now().uptimeNanoseconds >= deadline { finished.leave(); return }
            let request = OperationRequest(
                id: UUID(), origin: origin, method: "POST", target: "/v1/items",
                headers: [("Host", "127.0.0.1:9000"), ("Content-Type", "application/json"), ("Idempotency-Key", "k")],
                body: body, idempotencyKey: UUID().uuidString.lowercased(), fingerprint: [UInt8](repeating: 7, count: 32),
                priority: .normal, tag: nil, dependsOn: nil, createdAt: Int64(number))
            // As the store adds: the adds of a lane that meet in a transaction share its statements.
            committers[client % committers.count].add(request) { result in
                if case .failure = result { failures.add(1, ordering: .relaxed) } else { done.add(1, ordering: .relaxed) }
                // The next request is made off the database thread, as an event loop would make it.
                DispatchQueue.global().async { next(client) }
            }
        }
        for client in 0..<64 {
            finished.enter()
            DispatchQueue.global().async { next(client) }
        }
        finished.wait()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        #expect(failures.load(ordering: .relaxed) == 0)
        return (done.load(ordering: .relaxed), transactions.load(ordering: .relaxed), elapsed)
    }

    /// `pgbench` at 64 clients, one 1 KiB row per transaction, about `seconds` long: its tps.
    /// It runs a count of transactions (`-t`, from `rate`, the last arm's, or a first guess)
    /// rather than a time (`-T`): pgbench ends a timed run on `SIGALRM`, which a child of the
    /// test process inherits blocked, so a timed run never ends.
    static func pgbenchArm(_ server: PostgresServer, schema: String, seconds: Double, rate: Double) throws -> Double {
        let script = server.directory + "/insert-1k.sql"
        try "INSERT INTO \(schema).rows (body) VALUES (repeat('a', 1024));\n".write(toFile: script, atomically: true, encoding: .utf8)
        guard let bin = PostgresServer.binDirectory else { throw PostgresServer.StartError(description: PostgresServer.missing) }
        let (status, output) = try ChildProcess.run("\(bin)/pgbench", [
            "-n", "-c", "64", "-j", "2", "-t", String(max(10, Int(rate * seconds / 64))), "-f", script,
            "-h", "127.0.0.1", "-p", String(server.port), "-U", "outbox", "postgres",
        ])
        guard status == 0, let line = output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
              let tps = Double(line.dropFirst(6).prefix { $0 != " " }) else {
            throw PostgresServer.StartError(description: "pgbench exited \(status): \(output.suffix(400))")
        }
        return tps
    }

    @Test func groupCommitAgainstOneRowPerTransaction() async throws {
        let seconds = Self.seconds
        let report = try await PostgresServer.onThread { server -> [String] in
            let admin = try PostgresConnection(server.conninfo)
            defer { admin.close() }
            let schema = "bench_" + UUID().uuidString.prefix(8).lowercased()
            _ = try PostgresSchema.migrate(admin, schema: schema)
            guard let seconds else {
                let (adds, transactions, _) = Self.groupCommitArm(server, schema: schema, limit: 512, seconds: nil)
                let stored = try admin.execute("SELECT count(*) FROM \(schema).operations").rows[0][0]
                #expect(adds == 512)
                #expect(stored == "512")
                #expect(transactions < adds)
                return []
            }
            try admin.execute("CREATE TABLE \(schema).rows (id bigserial PRIMARY KEY, body text NOT NULL)")
            var lines: [String] = []
            var pgbenchRate = 5_000.0
            for round in 1...Self.rounds {
                let (adds, transactions, elapsed) = Self.groupCommitArm(server, schema: schema, limit: nil, seconds: seconds)
                let rate = Double(adds) / elapsed
                let tps = try Self.pgbenchArm(server, schema: schema, seconds: seconds, rate: pgbenchRate)
                pgbenchRate = tps
                lines.append(String(format: "postgres-bench: round %d: group commit %.0f adds/s (%.1f per transaction, %d connection%@)"
                                    + " | pgbench %.0f rows/s | ratio %.2f", round, rate, Double(adds) / Double(max(transactions, 1)),
                                    Self.connections, Self.connections == 1 ? "" : "s", tps, rate / tps))
            }
            return lines
        }
        for line in report { print(line) }
    }
}

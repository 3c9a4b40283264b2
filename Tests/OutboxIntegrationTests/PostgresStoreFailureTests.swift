import Foundation
import Glibc
import OutboxPostgres
import Synchronization
import TestPostgres
import Testing

/// The PostgreSQL store when its database is away, hostile or ahead of the binary (SPEC §9):
/// Outbox starts without it and forwards what needs no storage, answers `503
/// store_unavailable` instead of `202` while it is down, loses no acknowledged write across an
/// immediate restart of the server, reconnects by itself, never shows the password, and refuses
/// a schema a newer Outbox migrated with exit 2 naming both versions.
@Suite("PostgreSQL store: failures", .harnessThreads, .requires(PostgresServer.isInstalled, PostgresServer.missing))
struct PostgresStoreFailureTests {
    /// A password the server (trust authentication) ignores, and that must never be shown.
    static let password = "hunter2-Sekrit"

    /// Config JSON for `server`'s database in `schema`, the URL carrying the password.
    static func config(_ server: PostgresServer, schema: String, extra: String = "") -> String {
        """
        {"reachability": {"probeIntervalSeconds": 0.1}, "retry": {"preset": "immediate"},
         "queue": {"store": "postgres", "postgres": {"url": "postgresql://outbox:\(password)@127.0.0.1:\(server.port)/postgres",
                   "schema": "\(schema)", "leaseSeconds": 2}}\(extra)}
        """
    }

    static func newSchema() -> String { "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "") }

    static func status(_ outbox: OutboxProcess) throws -> JSONObject { try JSONObject(outbox.admin("status")) }

    /// Waits until `/admin/status` says the store is reachable (or is not), looking every 50 ms;
    /// the keeper reconnects with backoff (at most 5 s between tries).
    static func waitForStore(_ outbox: OutboxProcess, reachable: Bool, timeout: Duration = .seconds(20)) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let store = try status(outbox).object("store")
            if store?.bool("reachable") == reachable { return }
            guard ContinuousClock.now < deadline else {
                throw HarnessError("store not reachable=\(reachable) within \(timeout): \(String(describing: store))\n\(outbox)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test func aDatabaseDownAtStart_ForwardsReadsRefusesWritesWith503_ThenRecovers() async throws {
        let server = try await PostgresServer.blocking { try PostgresServer.start() }
        defer { server.stop() }
        server.stop()
        let upstream = try TestUpstream { _ in .respond(.text("live", status: 200)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL,
                                                   config: Self.config(server, schema: Self.newSchema()))

        let read = try outbox.send("GET", "/items")
        #expect(read.status == 200 && read.bodyText == "live", "a read that needs no storage was not forwarded:\n\(read)")
        let write = try outbox.send("POST", "/items", body: "x")
        #expect(write.status == 503, "\(write)")
        #expect(write.headers["Retry-After"] != nil, "503 without Retry-After:\n\(write)")
        #expect(try JSONObject(write).object("error")?.string("code") == "store_unavailable", "\(write)")
        let store = try Self.status(outbox).object("store")
        #expect(store?.string("kind") == "postgres")
        #expect(store?.bool("reachable") == false)
        #expect(store?.string("lastError")?.contains("127.0.0.1") == true, "\(String(describing: store))")
        #expect(upstream.requests.allSatisfy { $0.method == "GET" }, "a write reached the upstream while it could not be stored")
        // What cannot be read is not "not found".
        let listing = try outbox.admin("operations")
        #expect(listing.status == 503 && (try? JSONObject(listing).object("error")?.string("code")) == "store_unavailable", "\(listing)")

        try await PostgresServer.blocking { try server.restart() }
        try await Self.waitForStore(outbox, reachable: true)
        upstream.stop()
        let stored = try outbox.enqueue(body: "after")
        #expect(try outbox.operation(stored.id).string("status") == "pending")
        try await outbox.waitForLogLine(containing: ["warn", "store_unavailable"])
        try await outbox.waitForLog(containing: "store_available")
        // Once each way, however many requests met the outage.
        let lines = outbox.stderrText.split(separator: "\n")
        #expect(lines.filter { $0.contains("store_unavailable") && $0.contains("warn") }.count == 1, "\(outbox)")
        #expect(!outbox.stderrText.contains(Self.password), "the password reached the log:\n\(outbox)")
        #expect(!(try outbox.admin("status").bodyText.contains(Self.password)))
    }

    /// A lane this instance holds takes ahead what it can send soon, not more: writes that keep
    /// arriving behind an attempt that does not end (queued to keep their lane's order) are
    /// left in the database untaken, instead of each one taking another 64 ahead. What a lane
    /// took is what its mark covers: the operations a takeover would count an attempt for.
    @Test func aHeldLaneTakesAheadOnlyWhatItCanSendSoon() async throws {
        let server = try await TestStore.server()
        let schema = Self.newSchema()
        let gate = Gate()
        defer { gate.open() }
        let upstream = try TestUpstream { _ in .hold(until: gate, then: .respond(.text("ok"))) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.config(server, schema: schema))
        #expect(try outbox.send("PUT", "/admin/connectivity", body: #"{"mode":"offline"}"#).status == 200)
        #expect(try outbox.send("POST", "/items", body: "first").status == 202)
        #expect(try outbox.send("PUT", "/admin/connectivity", body: #"{"mode":"auto"}"#).status == 200)
        _ = try await upstream.waitForRequests(1)
        let writes = 300
        for n in 0..<writes {
            let response = try outbox.send("POST", "/items", body: "behind-\(n)")
            #expect(response.status == 202, "write \(n) was not queued behind the first: \(response.status)")
        }
        let counted = try await PostgresServer.blocking { () -> Int in
            let connection = try PostgresConnection(server.conninfo)
            defer { connection.close() }
            let rows = try connection.execute("""
                SELECT count(*) FROM \(schema).operations o JOIN \(schema).lanes l USING (origin, lane)
                 WHERE o.status IN ('pending', 'inProgress')
                   AND \(PostgresLanes.atOrBefore(rank: "o.lane_rank", seq: "o.seq", markRank: "l.taken_rank", markSeq: "l.taken_seq"))
                """)
            return Int(rows.rows.first?.first.flatMap { $0 } ?? "") ?? -1
        }
        // The attempt in flight, one look ahead (64) and at most one more started as it ran low.
        #expect((1...(1 + 2 * 64)).contains(counted), "\(counted) of \(writes + 1) operations were taken ahead")
    }

    /// Writes from several clients while the server is stopped immediately (`pg_ctl stop -m
    /// immediate`: no checkpoint, every session cut) and started again: every write answered
    /// `202` is there afterwards, the others were answered `503 store_unavailable`, and the
    /// writes after the restart are stored again.
    @Test func anImmediateRestartOfTheDatabaseUnderLoadLosesNoAcknowledgedWrite() async throws {
        let server = try await PostgresServer.blocking { try PostgresServer.start() }
        defer { server.stop() }
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.config(server, schema: Self.newSchema()))
        /// What the clients saw, awaited as it changes.
        struct Load: Sendable {
            var accepted: [String] = []
            var refused: [Int: Int] = [:]
            var finishedClients = 0
        }
        let load = WaitableState(Load())
        let phase = Mutex("before")
        let stopLoad = Atomic<Bool>(false)
        let clientCount = 4
        let clients = (0..<clientCount).map { client in
            Thread {
                // Bounded: a client stops at the test's word or after 20 000 requests.
                for n in 0..<20_000 where !stopLoad.load(ordering: .relaxed) {
                    guard let response = try? outbox.send("POST", "/items", body: "\(client)-\(n)",
                                                           headers: [HeaderField("Idempotency-Key", "k-\(client)-\(n)")]) else { continue }
                    if response.status == 202, let id = response.headers["Outbox-Operation-Id"] {
                        load.update { $0.accepted.append(id) }
                    } else {
                        load.update { $0.refused[response.status, default: 0] += 1 }
                        if response.status == 503 && phase.withLock({ $0 }) == "before" {
                            // Seen while the database was down: said once, with its code.
                            let code = (try? JSONObject(response))?.object("error")?.string("code")
                            if code != "store_unavailable" { load.update { $0.refused[-1, default: 0] += 1 } }
                        }
                    }
                }
                load.update { $0.finishedClients += 1 }
            }
        }
        for client in clients { client.start() }
        let waitForAccepted: @Sendable (Int) async throws -> Void = { count in
            _ = try await load.wait(timeout: .seconds(30), describeTimeout: { "\($0.accepted.count) of \(count) writes accepted in 30 s" },
                                    until: { $0.accepted.count >= count ? true : nil })
        }
        try await waitForAccepted(50)
        server.stop(immediate: true)
        try await Self.waitForStore(outbox, reachable: false)
        let beforeRestart = load.value.accepted.count
        // Let the clients meet the outage (the expectation below says when they did not).
        _ = try? await load.wait(timeout: .seconds(20), describeTimeout: { "\($0.refused)" },
                                 until: { ($0.refused[503] ?? 0) >= 10 ? true : nil })
        phase.withLock { $0 = "after" }
        try await PostgresServer.blocking { try server.restart() }
        try await Self.waitForStore(outbox, reachable: true)
        try await waitForAccepted(beforeRestart + 50)
        stopLoad.store(true, ordering: .relaxed)
        _ = try await load.wait(timeout: .seconds(30), describeTimeout: { "\($0.finishedClients) of \(clientCount) clients finished" },
                                until: { $0.finishedClients == clientCount ? true : nil })

        let ids = load.value.accepted
        let outcomes = load.value.refused
        #expect((outcomes[503] ?? 0) >= 10, "no write met the outage: \(outcomes)")
        #expect(outcomes[-1] == nil, "503s without store_unavailable while the database was down: \(outcomes)")
        #expect(Set(outcomes.keys).subtracting([503, -1]).isEmpty, "other answers than 202 and 503: \(outcomes)")
        var missing: [String] = []
        var firstMiss = ""
        var answers: [Int: Int] = [:]
        for id in ids {
            var response = try outbox.admin("operations/\(id)")
            // A 503 says the store could not be asked (a connection found broken by this read):
            // that is no answer about the write, so it is asked again once the store is back.
            let deadline = ContinuousClock.now + .seconds(10)
            while response.status == 503 && ContinuousClock.now < deadline {
                answers[503, default: 0] += 1
                try await Self.waitForStore(outbox, reachable: true)
                response = try outbox.admin("operations/\(id)")
            }
            answers[response.status, default: 0] += 1
            if response.status != 200 {
                if missing.isEmpty { firstMiss = "\(response)" }
                missing.append(id)
            }
        }
        let statusNow = (try? outbox.admin("status")).map { "\($0)" } ?? "-"
        #expect(missing.isEmpty, """
            \(missing.count) of \(ids.count) acknowledged writes are gone after the restart: \(missing.prefix(5)) \
            (the first at \(ids.firstIndex(of: missing.first ?? "") ?? -1) of the acknowledged); lookups answered \(answers); \
            the first miss answered \(firstMiss)\n\(statusNow)\n\(outbox)
            """)
        print("postgres-restart: \(ids.count) writes acknowledged, \(outcomes[503] ?? 0) refused with 503 while the database was down; "
              + "their lookups answered \(answers)")
    }

    @Test func migratePrintsTheVersion_AndANewerSchemaIsRefusedWithExitTwoNamingBothVersions() async throws {
        let server = try await TestStore.server()
        let schema = Self.newSchema()
        let directory = try TemporaryDirectory()
        let file = try directory.write(Self.config(server, schema: schema), to: "config.json")

        let migrated = try await CommandLineTests.run(["migrate", "--config", file])
        #expect(migrated.exit == .exited(0), "\(migrated.stderrText)")
        #expect(migrated.stdoutText.contains("to \(PostgresSchema.latestVersion)"), "\(migrated.stdoutText)")
        #expect(!(migrated.stdoutText + migrated.stderrText).contains(Self.password))
        let again = try await CommandLineTests.run(["migrate", "--config", file])
        #expect(again.exit == .exited(0))
        #expect(again.stdoutText.contains("at version \(PostgresSchema.latestVersion)"), "\(again.stdoutText)")

        let shown = try await CommandLineTests.run(["check-config", "--config", file])
        #expect(shown.exit == .exited(0))
        #expect(shown.stdoutText.contains("password=[set]"), "\(shown.stdoutText)")
        #expect(!shown.stdoutText.contains(Self.password), "check-config printed the password")

        try await PostgresServer.blocking {
            let connection = try PostgresConnection(server.conninfo)
            defer { connection.close() }
            try connection.execute("INSERT INTO \(schema).outbox_migrations (version, name) VALUES (99, 'from the future')")
        }
        let refused = try await CommandLineTests.run(["migrate", "--config", file])
        #expect(refused.exit == .exited(2), "\(refused.stderrText)")
        let line = refused.stderrText.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!line.contains("\n") && line.contains("99") && line.contains("\(PostgresSchema.latestVersion)"), "\(line)")

        let upstream = try TestUpstream()
        let serve = try OutboxProcess.launch(["--config", file, "--listen", "127.0.0.1:0", "--upstream", upstream.baseURL,
                                              "--data-dir", directory.file("data")])
        let exit = try await serve.waitForExit(timeout: .seconds(20))
        #expect(exit == .exited(2), "\(serve.stderrText)")
        let words = serve.stderrText.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!words.contains("\n") && words.contains("99") && words.contains("\(PostgresSchema.latestVersion)"), "\(words)")
    }

    @Test func aPostgresStoreWithoutAURLIsAConfigErrorNamingTheKey() async throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write(#"{"queue": {"store": "postgres"}}"#, to: "config.json")
        let result = try await CommandLineTests.run(["check-config", "--config", file])
        #expect(result.exit == .exited(2))
        #expect(result.stderrText.contains("queue.postgres.url"), "\(result.stderrText)")
    }
}

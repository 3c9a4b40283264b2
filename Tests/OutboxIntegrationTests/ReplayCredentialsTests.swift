import Foundation
import Glibc
import Synchronization
import Testing

/// Replay with fresh credentials (SPEC §10) against a real API and its token service: writes
/// queued with a token that has expired by the time the origin is back are held, then
/// delivered with a fresh token from a client's newer request, from a command, or set by hand;
/// the command runs once for many writes and again after a refusal; a held write survives
/// SIGTERM and kill -9, and so does a token learnt from a client; no token shows in a log line,
/// an event or an admin answer.
@Suite("Replay: fresh credentials", .harnessThreads)
struct ReplayCredentialsTests {
    /// Tokens the API takes; a test expires one by taking it out (as its 2 s life ending would).
    final class TokenService: Sendable {
        private let valid = Mutex<Set<String>>([])
        private let issued = Atomic<Int>(0)

        func issue() -> String {
            let token = "tok-\(issued.add(1, ordering: .relaxed).newValue)-\(UUID().uuidString.prefix(8))"
            valid.withLock { _ = $0.insert(token) }
            return token
        }

        func expire(_ token: String) { valid.withLock { _ = $0.remove(token) } }

        /// Makes `token`, issued elsewhere, one the API takes.
        func allow(_ token: String) { valid.withLock { _ = $0.insert(token) } }

        func accepts(_ authorization: String?) -> Bool {
            guard let authorization, authorization.hasPrefix("Bearer ") else { return false }
            return valid.withLock { $0.contains(String(authorization.dropFirst(7))) }
        }
    }

    /// The API: 201 for a write with a valid token, 401 otherwise; every request recorded.
    static func api(_ tokens: TokenService) throws -> TestUpstream {
        try TestUpstream { request in
            tokens.accepts(request.headers["Authorization"]) ? .respond(.text("created", status: 201))
                : .respond(.text(#"{"error":"invalid_token"}"#, status: 401))
        }
    }

    static func config(_ credentials: String, retry: String = #""preset": "immediate", "maxDelaySeconds": 3600"#) -> String {
        """
        {"reachability": {"probeIntervalSeconds": 0.1, "connectTimeoutSeconds": 1}, "retry": {\(retry)},
         "replay": {"credentials": [\(credentials)]}}
        """
    }

    static func bearer(_ token: String) -> HeaderField { HeaderField("Authorization", "Bearer \(token)") }

    /// Every place a secret must never appear: the proxy's log, the admin API's answers, and
    /// the events a listener got.
    static func expectNoSecret(_ secrets: [String], outbox: OutboxProcess, operations ids: [String], events: String = "") throws {
        var seen = outbox.stderrText + events
        seen += try outbox.admin("status").bodyText + (try outbox.admin("operations?limit=1000").bodyText)
        seen += try outbox.admin("credentials").bodyText + (try outbox.admin("metrics").bodyText)
        for id in ids { seen += try outbox.admin("operations/\(id)").bodyText }
        for secret in secrets { #expect(!seen.contains(secret), "the secret \(secret) was shown") }
    }

    @Test(arguments: TestStore.both)
    func aHeldWriteGoesWithTheToken_AClientSentSince(store: TestStore) async throws {
        let tokens = TokenService()
        let api = try Self.api(tokens)
        api.stop()
        let outbox = try await OutboxProcess.start(
            upstream: api.baseURL, config: Self.config(#"{"origin": "\#(api.baseURL)", "headers": ["authorization"], "from": "client"}"#),
            store: store)
        let events = try EventStreamClient(outbox)
        let old = tokens.issue()
        let first = try outbox.enqueue(body: "first", headers: [Self.bearer(old)])
        let second = try outbox.enqueue(body: "second", headers: [Self.bearer(old)])
        tokens.expire(old)
        try api.restart()
        let held = try await outbox.waitForOperation(first.id, describedAs: "held with auth: 401") { $0.string("lastError") == "auth: 401" }
        #expect(held.string("status") == "pending" && held.int("retryCount") == 0, "\(held)")

        // The app refreshed its token and made a request: its new token is learnt, and the held
        // writes go with it at once, in order.
        let fresh = tokens.issue()
        let read = try outbox.send("GET", "/profile", headers: [Self.bearer(fresh)])
        #expect(read.status == 201, "\(read)")
        _ = try outbox.drain()
        let writes = api.requests.filter { $0.method == "POST" }
        #expect(writes.map(\.bodyText) == ["first", "first", "second"], "\(writes.map(\.bodyText))")
        #expect(writes.map { $0.headers["Authorization"] } == ["Bearer \(old)", "Bearer \(fresh)", "Bearer \(fresh)"])
        for id in [first.id, second.id] { #expect(try outbox.operation(id).string("status") == "completed") }
        // Every event up to the last write's completion, the hold among them.
        var seenEvents: [String] = []
        while true {
            let event = try events.next()
            seenEvents.append(event.data)
            let data = try event.json()
            if event.type == "operation", data.string("id") == second.id, data.string("status") == "completed" { break }
        }
        #expect(seenEvents.contains { $0.contains("auth: 401") }, "the hold was no event: \(seenEvents)")
        try Self.expectNoSecret([old, fresh], outbox: outbox, operations: [first.id, second.id], events: seenEvents.joined())
    }

    @Test func aCommandsTokenIsCachedForManyWrites_AndAskedForAgainAfterARefusal() async throws {
        let tokens = TokenService()
        let api = try Self.api(tokens)
        api.stop()
        let directory = try TemporaryDirectory()
        let tokenFile = directory.file("token")
        let runs = directory.file("runs")
        // The recipe of docs/credentials.md: a command printing the token a login step refreshes.
        let command = try directory.write("""
            #!/bin/sh
            echo "$OUTBOX_ORIGIN" >> \(runs)
            printf '{"headers": {"Authorization": "Bearer %s"}}' "$(cat \(tokenFile))"
            """, to: "get-token")
        chmod(command, 0o755)
        var token = tokens.issue()
        try token.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let outbox = try await OutboxProcess.start(
            upstream: api.baseURL,
            config: Self.config(#"{"origin": "\#(api.baseURL)", "headers": ["authorization"], "from": "command", "command": ["\#(command)"]}"#))
        // Stored with a token long gone: the command's replaces it on every attempt.
        let ids = try (0..<3).map { try outbox.enqueue(body: "w\($0)", headers: [Self.bearer("stale")]).id }
        try api.restart()
        _ = try outbox.drain()
        #expect(api.requests.map { $0.headers["Authorization"] } == Array(repeating: "Bearer \(token)", count: 3))
        #expect(try String(contentsOfFile: runs, encoding: .utf8) == api.baseURL + "\n", "one run for three writes, with its origin")

        // The token expires: the next write is refused once, the command runs again, and its new
        // token (the login step refreshed the file) delivers it.
        tokens.expire(token)
        token = tokens.issue()
        try token.write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let late = try outbox.enqueue(body: "late", headers: [HeaderField("Outbox-Mode", "queue"), Self.bearer("stale")])
        _ = try outbox.drain()
        #expect(try outbox.operation(late.id).string("status") == "completed")
        #expect(try String(contentsOfFile: runs, encoding: .utf8).split(separator: "\n").count == 2)
        #expect(api.requests.last?.headers["Authorization"] == "Bearer \(token)")
        try Self.expectNoSecret([token], outbox: outbox, operations: ids + [late.id])
    }

    @Test(arguments: [
        ("exit 1", "the command exited with status 1"),
        ("echo 'Bearer abc'", "the command's stdout is not a JSON object"),
        ("exec sleep 60", "the command did not finish within 0.5 s (killed)"),
    ])
    func aCommandThatFailsHoldsTheWrite_SayingWhy_AndSendsNothing(ending: String, reason: String) async throws {
        let tokens = TokenService()
        let api = try Self.api(tokens)
        let directory = try TemporaryDirectory()
        let command = try directory.write("#!/bin/sh\necho 'no token today' >&2\n\(ending)\n", to: "get-token")
        chmod(command, 0o755)
        let rule = #"{"origin": "\#(api.baseURL)", "headers": ["authorization"], "from": "command", "command": ["\#(command)"], "#
            + #""timeoutSeconds": 0.5}"#
        let outbox = try await OutboxProcess.start(upstream: api.baseURL, config: Self.config(rule, retry: #""preset": "immediate""#))
        let queued = try outbox.enqueue(body: "x", headers: [HeaderField("Outbox-Mode", "queue")])
        let held = try await outbox.waitForOperation(queued.id, describedAs: "held for credentials") {
            $0.string("lastError") == "credentials: \(reason)"
        }
        #expect(held.string("status") == "pending" && held.int("retryCount") == 0, "\(held)")
        #expect(api.requests.isEmpty, "a write went without credentials")
        try await outbox.waitForLogLine(containing: ["warn", "credentials_command_stderr", "no token today"])
        // Set by hand, they win over the rule's source: the write goes.
        let token = tokens.issue()
        let set = try outbox.exchange("""
            PUT /admin/credentials HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \
            \(#"{"origin": "\#(api.baseURL)", "headers": {"Authorization": "Bearer \#(token)"}}"#.utf8.count)\r\n\r\n\
            {"origin": "\(api.baseURL)", "headers": {"Authorization": "Bearer \(token)"}}
            """, method: "PUT")
        #expect(set.status == 204, "\(set)")
        _ = try outbox.drain()
        #expect(try outbox.operation(queued.id).string("status") == "completed")
        let listed = try JSONObject(outbox.admin("credentials")).objects("credentials") ?? []
        #expect(listed.contains { $0.string("source") == "admin" && $0.string("origin") == api.baseURL }, "\(listed)")
        try Self.expectNoSecret([token], outbox: outbox, operations: [queued.id])
    }

    @Test(arguments: [SIGTERM, SIGKILL])
    func aHeldWriteAndALearntTokenOutliveARestart(signal: Int32) async throws {
        let tokens = TokenService()
        let api = try Self.api(tokens)
        api.stop()
        let config = Self.config(#"{"origin": "\#(api.baseURL)", "headers": ["authorization"], "from": "client"}"#)
        let first = try await OutboxProcess.start(upstream: api.baseURL, config: config)
        let old = tokens.issue()
        let queued = try first.enqueue(body: "x", headers: [Self.bearer(old)])
        tokens.expire(old)
        try api.restart()
        _ = try await first.waitForOperation(queued.id, describedAs: "held") { $0.string("lastError") == "auth: 401" }
        // A token a client sent meanwhile, learnt and kept on disk; the API does not take it yet.
        let learnt = "not-yet-\(UUID().uuidString.prefix(8))"
        _ = try first.send("GET", "/profile", headers: [Self.bearer(learnt)])
        try await first.waitForLog(containing: "method=GET target=/profile")
        // The file is written off the loop: look until it holds the token (bounded).
        let file = first.directory.file("data") + "/credentials.json"
        let deadline = ContinuousClock.now + .seconds(10)
        while !((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").contains(learnt) {
            guard ContinuousClock.now < deadline else { throw HarnessError("the learnt token never reached \(file)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        first.terminate(signal: signal)
        _ = try await first.waitForExit()

        let second = try await OutboxProcess.start(upstream: api.baseURL, config: config, dataDirectory: first.directory.file("data"))
        // After SIGTERM it is held as it was; after kill -9 its last outcome may not have reached
        // the disk, so it is sent once more (at-least-once), with the token learnt before the
        // restart, refused, and held again. Either way it is held, never failed.
        let after = try await second.waitForOperation(queued.id, describedAs: "held after the restart") {
            $0.string("status") == "pending" && $0.string("lastError") == "auth: 401"
        }
        #expect(after.int("retryCount") == 0, "\(after)")
        let resends = api.requests.dropFirst().map { $0.headers["Authorization"] }
        #expect(resends.allSatisfy { $0 == "Bearer \(learnt)" }, "a resend after the restart went without the learnt token: \(resends)")
        // The token learnt before the restart is the one it is sent with once the API takes it.
        tokens.allow(learnt)
        _ = try second.send("POST", "/admin/operations/\(queued.id)/retry")
        _ = try second.drain()
        #expect(api.requests.last?.headers["Authorization"] == "Bearer \(learnt)")
        #expect(try second.operation(queued.id).string("status") == "completed")
    }
}

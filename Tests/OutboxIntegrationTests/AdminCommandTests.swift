import Foundation
import Glibc
import Testing

/// The admin commands (`outbox status`, `ops`, `op`, `drain`, `offline`, `online`, `retry`),
/// run as their own processes against a running Outbox: what they print, and the exit codes a
/// CI job branches on.
@Suite("Admin commands", .harnessThreads)
struct AdminCommandTests {
    /// Runs `outbox <arguments>` to completion, with `environment` added to the clean one.
    static func command(_ arguments: [String], environment: [String: String] = [:]) async throws -> ChildProcess.Observed {
        let child = try OutboxProcess.launch(arguments, environment: ChildProcess.cleanEnvironment().merging(environment) { $1 })
        _ = try await child.waitForExit(timeout: .seconds(60))
        return child.observed.value
    }

    static func command(_ outbox: OutboxProcess, _ arguments: [String]) async throws -> ChildProcess.Observed {
        try await command(arguments + ["--admin", outbox.baseURL])
    }

    static func lines(_ text: String) -> [Substring] {
        text.split(separator: "\n", omittingEmptySubsequences: true)
    }

    static func json(_ observed: ChildProcess.Observed) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(observed.stdout)) as? [String: Any],
                     "stdout is not a JSON object:\n\(observed.stdoutText)")
    }

    @Test func statusOpsAndOpShowTheQueue() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let tagged = try outbox.enqueue(body: "one", headers: [HeaderField("Outbox-Tag", "nightly import")])
        let other = try outbox.enqueue(body: "two")

        let status = try await Self.command(outbox, ["status"])
        #expect(status.exit == .exited(0), "\(status.stderrText)")
        #expect(status.stdoutText.contains("connectivity: auto"), "\(status.stdoutText)")
        #expect(status.stdoutText.contains("pending 2,"), "\(status.stdoutText)")
        #expect(Self.lines(status.stdoutText).contains { $0.contains(upstream.baseURL) && $0.contains("offline") },
                "\(status.stdoutText)")

        let all = try await Self.command(outbox, ["ops"])
        #expect(all.exit == .exited(0), "\(all.stderrText)")
        let rows = Self.lines(all.stdoutText)
        #expect(rows.first?.hasPrefix("ID") == true && rows.count == 3, "\(all.stdoutText)")
        #expect(rows[1].hasPrefix(tagged.id) && rows[2].hasPrefix(other.id), "not in queue order:\n\(all.stdoutText)")

        // A filter value with a space reaches the API as typed.
        let filtered = try await Self.command(outbox, ["ops", "--tag", "nightly import", "--json"])
        #expect(filtered.exit == .exited(0), "\(filtered.stderrText)")
        let operations = try #require(try Self.json(filtered)["operations"] as? [[String: Any]])
        #expect(operations.map { $0["id"] as? String } == [tagged.id], "\(filtered.stdoutText)")

        let one = try await Self.command(outbox, ["op", tagged.id])
        #expect(one.exit == .exited(0), "\(one.stderrText)")
        #expect(one.stdoutText.contains("idempotencyKey: \(tagged.idempotencyKey)"), "\(one.stdoutText)")
        #expect(Self.lines(one.stdoutText).contains("body: one"), "\(one.stdoutText)")
        #expect(Self.lines(one.stdoutText).contains("status: pending"), "\(one.stdoutText)")
    }

    @Test func drainExitsFourOnTimeoutThreeWhenWritesWereLostZeroWhenAllDelivered() async throws {
        let upstream = try TestUpstream { request in
            request.bodyText == "bad" ? .respond(.text("no such field", status: 400)) : .respond(.text("created", status: 201))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let bad = try outbox.enqueue(body: "bad")
        let good = try outbox.enqueue(body: "good")

        let waiting = try await Self.command(outbox, ["drain", "--timeout", "0"])
        #expect(waiting.exit == .exited(4), "\(waiting.stdoutText)\n\(waiting.stderrText)")
        #expect(Self.lines(waiting.stderrText) == ["outbox: not drained after 0 s: pending 2, inProgress 0, completed 0, failed 0, conflict 0"],
                "\(waiting.stderrText)")

        try upstream.restart()
        let lost = try await Self.command(outbox, ["drain", "--timeout", "30"])
        #expect(lost.exit == .exited(3), "\(lost.stdoutText)\n\(lost.stderrText)")
        #expect(Self.lines(lost.stderrText) == ["outbox: drained, but 1 operation ended failed or conflict"], "\(lost.stderrText)")
        #expect(Self.lines(lost.stdoutText).contains { $0.hasPrefix(bad.id) && $0.contains("failed") }, "\(lost.stdoutText)")
        #expect(!lost.stdoutText.contains(good.id), "a completed operation listed as lost:\n\(lost.stdoutText)")
        let lostJSON = try await Self.command(outbox, ["drain", "--json"])
        #expect(lostJSON.exit == .exited(3))
        #expect((try Self.json(lostJSON)["lost"] as? [[String: Any]])?.map { $0["id"] as? String } == [bad.id],
                "\(lostJSON.stdoutText)")

        #expect(try outbox.send("DELETE", "/admin/operations?status=failed").status == 200)
        let clean = try await Self.command(outbox, ["drain", "--timeout", "30"])
        #expect(clean.exit == .exited(0), "\(clean.stdoutText)\n\(clean.stderrText)")
        #expect(clean.stdoutText.hasPrefix("drained: pending 0, inProgress 0, completed 1,"), "\(clean.stdoutText)")
    }

    @Test func offlineQueuesEveryWriteAndOnlineDeliversThem() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())

        let offline = try await Self.command(outbox, ["offline"])
        #expect(offline.exit == .exited(0) && offline.stdoutText == "connectivity: offline\n", "\(offline.stdoutText)\(offline.stderrText)")
        let queued = try outbox.enqueue(body: "while offline")
        #expect(try Self.json(try await Self.command(outbox, ["status", "--json"]))["connectivity"] as? String == "offline")
        #expect(upstream.requests.isEmpty)

        let online = try await Self.command(outbox, ["online"])
        #expect(online.exit == .exited(0) && online.stdoutText == "connectivity: auto\n", "\(online.stdoutText)\(online.stderrText)")
        let drained = try await Self.command(outbox, ["drain", "--timeout", "30"])
        #expect(drained.exit == .exited(0), "\(drained.stderrText)")
        #expect(upstream.requests.map(\.bodyText) == ["while offline"])
        #expect(try outbox.operation(queued.id).string("status") == "completed")
    }

    @Test func retryMakesAFailedOperationPendingAgain() async throws {
        let verdict = WaitableState(400)
        let upstream = try TestUpstream { _ in .respond(.text("answer", status: verdict.value)) }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let operation = try outbox.enqueue(body: "retry me")
        try upstream.restart()
        _ = try await outbox.waitForOperation(operation.id, toBe: ["failed"])

        verdict.update { $0 = 201 }
        let retried = try await Self.command(outbox, ["retry", operation.id])
        #expect(retried.exit == .exited(0), "\(retried.stderrText)")
        // Pending when answered, unless the replayer was quicker than the answer.
        #expect(["pending", "inProgress", "completed"].map { "\(operation.id) retried, now \($0)\n" }.contains(retried.stdoutText),
                "\(retried.stdoutText)")
        #expect(try await Self.command(outbox, ["drain"]).exit == .exited(0))
        #expect(try outbox.operation(operation.id).string("status") == "completed")
    }

    @Test func anErrorOrAnUnreachableAPIIsExitOneWithOneLineNamingTheURL() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("ok")) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let missing = "00000000-0000-4000-8000-000000000000"
        let notFound = try await Self.command(outbox, ["op", missing])
        #expect(notFound.exit == .exited(1))
        #expect(Self.lines(notFound.stderrText).count == 1, "\(notFound.stderrText)")
        #expect(notFound.stderrText.contains("\(outbox.baseURL)/admin/operations/\(missing): HTTP 404 not_found"),
                "\(notFound.stderrText)")

        let closed = try LocalPort.unused()
        let refused = try await Self.command(["status", "--admin", "http://127.0.0.1:\(closed)"])
        #expect(refused.exit == .exited(1))
        #expect(Self.lines(refused.stderrText) == ["outbox: http://127.0.0.1:\(closed)/admin/status: connection refused"],
                "\(refused.stderrText)")

        let usage = try await Self.command(["status", "--admin", "ftp://127.0.0.1:21"])
        #expect(usage.exit == .exited(2))
        #expect(Self.lines(usage.stderrText).count == 1 && usage.stderrText.contains(#""ftp://127.0.0.1:21""#), "\(usage.stderrText)")
    }

    @Test func theAddressPrefixAndTokenComeFromTheConfigUnlessGiven() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("ok")) }
        let outbox = try await OutboxProcess.start(
            upstream: upstream.baseURL, config: #"{"admin": {"pathPrefix": "/_outbox", "token": "s3cret"}}"#)
        let directory = try TemporaryDirectory()
        let config = try directory.write(#"""
            {"listen": "127.0.0.1:\#(outbox.port)", "admin": {"pathPrefix": "/_outbox", "token": "s3cret"}}
            """#, to: "config.json")
        let fromConfig = try await Self.command(["status", "--config", config])
        #expect(fromConfig.exit == .exited(0), "\(fromConfig.stderrText)")
        #expect(fromConfig.stdoutText.hasPrefix("connectivity: auto\n"), "\(fromConfig.stdoutText)")

        // The URL from the environment, the prefix from OUTBOX_CONFIG, no token: the API says 401.
        let prefixOnly = try directory.write(#"{"admin": {"pathPrefix": "/_outbox"}}"#, to: "prefix.json")
        let environment = ["OUTBOX_ADMIN_URL": outbox.baseURL, "OUTBOX_CONFIG": prefixOnly]
        let unauthorized = try await Self.command(["status"], environment: environment)
        #expect(unauthorized.exit == .exited(1))
        #expect(unauthorized.stderrText.contains("\(outbox.baseURL)/_outbox/status: HTTP 401"), "\(unauthorized.stderrText)")
        let authorized = try await Self.command(["status"], environment: environment.merging(["OUTBOX_ADMIN_TOKEN": "s3cret"]) { $1 })
        #expect(authorized.exit == .exited(0), "\(authorized.stderrText)")
    }

    /// `outbox health` is the image's HEALTHCHECK: it finds the listener the way the container's
    /// `serve` does (`OUTBOX_CONFIG`, a listen address on every interface reached through
    /// loopback, `OUTBOX_ADMIN_TOKEN`), and exits 0 only when the admin API answers 200.
    @Test func healthFollowsTheConfiguredListenerAndExitsOneUnlessTheAPIAnswers200() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("ok")) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: #"{"admin": {"token": "s3cret"}}"#)
        let directory = try TemporaryDirectory()
        let config = try directory.write(#"{"listen": "0.0.0.0:\#(outbox.port)"}"#, to: "config.json")

        let healthy = try await Self.command(["health"], environment: ["OUTBOX_CONFIG": config, "OUTBOX_ADMIN_TOKEN": "s3cret"])
        #expect(healthy.exit == .exited(0), "\(healthy.stderrText)")
        #expect(Self.lines(healthy.stdoutText).count == 1, "\(healthy.stdoutText)")
        #expect(healthy.stdoutText.hasPrefix("healthy: http://127.0.0.1:\(outbox.port) answered (version "), "\(healthy.stdoutText)")
        #expect(healthy.stdoutText.hasSuffix(", 0 pending)\n"), "\(healthy.stdoutText)")

        // Listening, but the API refuses: a 401 is not healthy.
        let refused = try await Self.command(["health"], environment: ["OUTBOX_CONFIG": config])
        #expect(refused.exit == .exited(1))
        #expect(Self.lines(refused.stderrText).count == 1, "\(refused.stderrText)")
        #expect(refused.stderrText.hasPrefix("outbox: unhealthy: GET \(outbox.baseURL)/admin/status: HTTP 401"), "\(refused.stderrText)")

        let closed = try LocalPort.unused()
        let nothing = try await Self.command(["health", "--admin", "http://127.0.0.1:\(closed)"])
        #expect(nothing.exit == .exited(1))
        #expect(Self.lines(nothing.stderrText) == ["outbox: unhealthy: http://127.0.0.1:\(closed)/admin/status: connection refused"],
                "\(nothing.stderrText)")

        let unknowable = try directory.write(#"{"listen": "127.0.0.1:0"}"#, to: "port0.json")
        let usage = try await Self.command(["health", "--config", unknowable])
        #expect(usage.exit == .exited(2))
        #expect(Self.lines(usage.stderrText).count == 1 && usage.stderrText.contains("port 0"), "\(usage.stderrText)")
    }
}

import Foundation
import Glibc
import Testing

/// `admin.listen`: the admin API on a listener of its own, and the main listener forwarding
/// `admin.pathPrefix` to the upstream like any other path, through real sockets.
@Suite("Admin listener", .harnessThreads)
struct AdminListenerTests {
    static let adminOnItsOwnPort = #"{"admin": {"listen": "127.0.0.1:0"}}"#

    /// An upstream that answers every request with its own target, so a test can tell its
    /// answers from the admin API's.
    static func echoingUpstream() throws -> TestUpstream {
        try TestUpstream { request in .respond(.text("upstream saw \(request.target)")) }
    }

    @Test func adminAPIAnswersOnTheAdminPort_AndTheMainPortForwardsThePrefixUpstream() async throws {
        let upstream = try Self.echoingUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.adminOnItsOwnPort)
        let adminPort = try outbox.adminPort()
        #expect(adminPort != outbox.port)

        let status = try outbox.sendToAdminListener("GET", "/admin/status")
        #expect(status.status == 200, "\(status)\n\(outbox)")
        #expect(status.headers["Content-Type"]?.hasPrefix("application/json") == true, "\(status)")
        #expect(try JSONObject(status).string("connectivity") == "auto", "\(status)")
        #expect(upstream.requests.isEmpty, "the admin listener forwarded: \(upstream.requests)")

        let forwarded = try outbox.send("GET", "/admin/status")
        #expect(forwarded.status == 200, "\(forwarded)\n\(outbox)")
        #expect(forwarded.bodyText == "upstream saw /admin/status", "\(forwarded)")
        let received = try await upstream.waitForRequests(1)
        #expect(received.map(\.target) == ["/admin/status"])
        #expect(received.first?.headers["Host"] == upstream.authority)
    }

    /// Proxy clients at `limits.maxConnections` do not lock the operator out: the admin
    /// listener counts its connections apart.
    @Test func theAdminListenerAnswers_WhileTheMainListenerIsAtItsConnectionLimit() async throws {
        let upstream = try Self.echoingUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"admin": {"listen": "127.0.0.1:0"}, "limits": {"maxConnections": 2}}
            """)
        // Two connections that have each been served are surely counted.
        let held = try (0..<2).map { _ in try outbox.connect() }
        for client in held {
            try client.send("GET /hold HTTP/1.1\r\nHost: h\r\n\r\n")
            #expect(try client.readResponse().status == 200)
        }
        expectErrorResponse(try outbox.connect().readResponse(), status: 503, from: outbox)
        // As many admin connections as the limit, all open at once, each answered.
        var adminClients: [RawClient] = []
        for _ in 0..<2 {
            let client = try RawClient(port: try outbox.adminPort())
            try client.send("GET /admin/status HTTP/1.1\r\nHost: 127.0.0.1:\(try outbox.adminPort())\r\n\r\n")
            let status = try client.readResponse()
            #expect(status.status == 200, "\(status)\n\(outbox)")
            adminClients.append(client)
        }
        _ = held
    }

    @Test func pipelinedRequestsOnTheMainPortBothReachTheUpstreamInOrder() async throws {
        let upstream = try Self.echoingUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.adminOnItsOwnPort)
        let client = try outbox.connect()
        try client.send("GET /x HTTP/1.1\r\nHost: h\r\n\r\nGET /admin/ HTTP/1.1\r\nHost: h\r\n\r\n")
        for target in ["/x", "/admin/"] {
            let response = try client.readResponse()
            #expect(response.status == 200, "\(target): \(response)\n\(outbox)")
            #expect(response.bodyText == "upstream saw \(target)", "\(target): \(response)")
        }
        let received = try await upstream.waitForRequests(2)
        #expect(received.map(\.target) == ["/x", "/admin/"])
    }

    @Test func writesToThePrefixOnTheMainPortAreQueuedLikeAnyWrite_AndLocationPointsAtTheAdminPort() async throws {
        let upstream = try Self.echoingUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.adminOnItsOwnPort)
        let adminPort = try outbox.adminPort()
        let queued = try outbox.enqueue("/admin/flush", body: "for the upstream", headers: [HeaderField("Outbox-Mode", "queue")])
        let location = try #require(queued.response.headers["Location"], "\(queued.response)")
        let expectedPrefix = "http://127.0.0.1:\(adminPort)/admin/operations/"
        #expect(location == expectedPrefix + queued.id, "\(queued.response)")

        let delivered = try await upstream.waitForRequests(1)
        #expect(delivered.map(\.target) == ["/admin/flush"])
        #expect(delivered.first?.bodyText == "for the upstream")
        let detail = try outbox.sendToAdminListener("GET", String(location.dropFirst("http://127.0.0.1:\(adminPort)".count)))
        #expect(detail.status == 200, "\(detail)\n\(outbox)")
        #expect(try JSONObject(detail).string("id") == queued.id, "\(detail)")
    }

    @Test func tokenIsRequiredOnTheAdminPortWhenConfigured() async throws {
        let upstream = try Self.echoingUpstream()
        let outbox = try await OutboxProcess.start(
            upstream: upstream.baseURL, config: #"{"admin": {"listen": "127.0.0.1:0", "token": "s3cret-token"}}"#)
        let missing = try outbox.sendToAdminListener("GET", "/admin/status")
        expectErrorResponse(missing, status: 401, from: outbox)
        #expect(missing.headers["WWW-Authenticate"] == "Bearer", "\(missing)")
        let wrong = try outbox.sendToAdminListener("GET", "/admin/status", headers: [HeaderField("Authorization", "Bearer nope")])
        expectErrorResponse(wrong, status: 401, from: outbox)
        let right = try outbox.sendToAdminListener("GET", "/admin/status",
                                                   headers: [HeaderField("Authorization", "Bearer s3cret-token")])
        #expect(right.status == 200, "\(right)\n\(outbox)")
        #expect(upstream.requests.isEmpty, "the admin listener forwarded: \(upstream.requests)")
    }

    @Test func crossSiteOriginAndForeignHostAreRefusedOnTheAdminPort() async throws {
        let upstream = try Self.echoingUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.adminOnItsOwnPort)
        let adminPort = try outbox.adminPort()
        let crossSite = try outbox.sendToAdminListener("GET", "/admin/status", headers: [HeaderField("Origin", "http://evil.example")])
        expectErrorResponse(crossSite, status: 403, from: outbox)
        // Pages on the main port are the upstream's in reverse mode: another site for the API.
        let mainPortPage = try outbox.sendToAdminListener("GET", "/admin/status",
                                                          headers: [HeaderField("Origin", "http://127.0.0.1:\(outbox.port)")])
        expectErrorResponse(mainPortPage, status: 403, from: outbox)
        let sameSite = try outbox.sendToAdminListener("GET", "/admin/status",
                                                      headers: [HeaderField("Origin", "http://127.0.0.1:\(adminPort)")])
        #expect(sameSite.status == 200, "\(sameSite)\n\(outbox)")
        let rebound = try outbox.sendToAdminListener("GET", "/admin/status", host: "rebound.example:\(adminPort)")
        expectErrorResponse(rebound, status: 403, from: outbox)
        #expect(upstream.requests.isEmpty, "the admin listener forwarded: \(upstream.requests)")
    }

    @Test(arguments: ["/x", "/administrator", "/", "http://127.0.0.1:9/admin/status"])
    func aTargetOutsideThePrefixOnTheAdminPortIs404AndNeverForwarded(target: String) async throws {
        let upstream = try Self.echoingUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.adminOnItsOwnPort)
        let response = try outbox.sendToAdminListener("GET", target)
        expectErrorResponse(response, status: 404, from: outbox)
        #expect(response.errorEnvelope?.code == "not_found", "\(response)")
        // The answer came from Outbox, not over a connection to the upstream.
        #expect(upstream.acceptedConnectionCount == 0 && upstream.requests.isEmpty,
                "the upstream was reached: \(upstream.requests)")
    }

    @Test func sigtermClosesTheAdminListenerToo() async throws {
        let released = Gate()
        let upstream = try TestUpstream { request in
            request.target == "/slow" ? .hold(until: released, then: .respond(.text("late"))) : .respond(.text("ok"))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.adminOnItsOwnPort)
        let adminPort = try outbox.adminPort()
        #expect(!RawClient.isRefused(port: adminPort))
        let client = try outbox.connect()
        try client.send("GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
        try await upstream.waitForRequests(1)

        outbox.terminate(signal: SIGTERM)
        try await outbox.waitForLog(containing: "accepting_stopped", timeout: .seconds(5))
        // The held exchange keeps the process alive, so a refused connect is the listener closing.
        #expect(outbox.child.isRunning, "\(outbox)")
        #expect(RawClient.isRefused(port: adminPort), "admin listener still accepting after the signal\n\(outbox)")
        #expect(RawClient.isRefused(port: outbox.port), "\(outbox)")
        released.open()
        #expect(try client.readResponse().bodyText == "late", "\(outbox)")
        #expect(try await outbox.waitForExit() == .exited(0), "\(outbox)")
    }

    // MARK: Start-up and config

    static func run(_ arguments: [String]) async throws -> ChildProcess.Observed {
        let child = try OutboxProcess.launch(arguments)
        _ = try await child.waitForExit(timeout: .seconds(15))
        return child.observed.value
    }

    @Test func busyAdminPortExitsOneWithOneLineNamingAdminListen() async throws {
        let busy = try LocalPort.reserve()
        let directory = try TemporaryDirectory()
        let file = try directory.write(#"{"admin": {"listen": "127.0.0.1:\#(busy.port)"}}"#, to: "config.json")
        let result = try await Self.run([
            "--config", file, "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9", "--data-dir", directory.file("data"),
        ])
        #expect(result.exit == .exited(1), "stderr:\n\(result.stderrText)")
        let lines = nonEmptyLines(result.stderrText)
        #expect(lines.count == 1, "stderr:\n\(result.stderrText)")
        #expect(lines.first?.contains("admin.listen") == true, "stderr:\n\(result.stderrText)")
        #expect(lines.first?.contains("127.0.0.1:\(busy.port)") == true, "stderr:\n\(result.stderrText)")
        #expect(!result.stderrText.contains("listening on"), "stderr:\n\(result.stderrText)")
        #expect(!looksLikeStackTrace(result.stderrText + result.stdoutText))
    }

    @Test func checkConfigShowsAdminListen() async throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write(#"{"admin": {"listen": "127.0.0.1:9091"}}"#, to: "config.json")
        let result = try await Self.run(["check-config", "--config", file])
        #expect(result.exit == .exited(0), "\(result.stderrText)")
        let object = try #require(try? JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any],
                                  "stdout is not a JSON object:\n\(result.stdoutText)")
        let admin = object["admin"] as? [String: Any]
        #expect(admin?["listen"] as? String == "127.0.0.1:9091", "\(result.stdoutText)")

        let defaults = try await Self.run(["check-config", "--config", try directory.write("{}", to: "empty.json")])
        let defaultObject = try JSONSerialization.jsonObject(with: Data(defaults.stdout)) as? [String: Any]
        let defaultAdmin = defaultObject?["admin"] as? [String: Any]
        #expect(defaultAdmin?.keys.contains("listen") == true && defaultAdmin?["listen"] is NSNull, "\(defaults.stdoutText)")
    }

    @Test(arguments: [
        #"{"admin": {"listen": "localhost"}}"#,
        #"{"admin": {"listen": 9091}}"#,
        #"{"listen": "127.0.0.1:9091", "admin": {"listen": "127.0.0.1:9091"}}"#,
    ])
    func aBadAdminListenIsAConfigErrorNamingIt(json: String) async throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write(json, to: "config.json")
        let result = try await Self.run(["check-config", "--config", file])
        #expect(result.exit == .exited(2), "stdout:\n\(result.stdoutText)\nstderr:\n\(result.stderrText)")
        let lines = nonEmptyLines(result.stderrText)
        #expect(lines.count == 1 && lines.first?.contains("admin.listen") == true, "stderr:\n\(result.stderrText)")
        #expect(!looksLikeStackTrace(result.stderrText + result.stdoutText))
    }

    @Test func theMainListeningLineIsNotMistakenForTheAdminOne() {
        let stderr = "outbox admin listening on http://127.0.0.1:4001\noutbox listening on http://127.0.0.1:4002\n"
        #expect(OutboxProcess.listeningPort(in: stderr) == 4002)
        #expect(OutboxProcess.listeningPort(in: stderr, prefix: OutboxProcess.adminListeningPrefix) == 4001)
    }
}

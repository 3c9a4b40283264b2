import Testing

/// SPEC §3 through the real binary: Outbox never proxies to one of its own listeners (by any
/// name or address that reaches it: `508 forwarding_loop`, nothing reached, nothing stored),
/// and while `listen` is not loopback, `*` does not reach loopback targets (`403`) unless
/// `allowedHosts` names them exactly.
@Suite("Forwarding targets: never itself, no wildcard to loopback", .harnessThreads)
struct ForwardingTargetTests {
    static let forwardEverywhere = #"{"forwardProxy": {"enabled": true, "allowedHosts": ["*"], "connectPorts": [443]}}"#

    /// `GET http://<authority><path>` through the main listener.
    static func forward(_ outbox: OutboxProcess, _ authority: String, _ path: String = "/admin/status",
                        method: String = "GET", headers: String = "", body: String = "") throws -> HTTPResponse {
        try outbox.exchange("\(method) http://\(authority)\(path) HTTP/1.1\r\nHost: \(authority)\r\n\(headers)"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)", method: method)
    }

    static func expectForwardingLoop(_ response: HTTPResponse, from outbox: OutboxProcess,
                                     sourceLocation: SourceLocation = #_sourceLocation) {
        expectErrorResponse(response, status: 508, from: outbox, sourceLocation: sourceLocation)
        #expect(response.errorEnvelope?.code == "forwarding_loop", "\(response)", sourceLocation: sourceLocation)
    }

    /// The fault rules the admin API holds: a rule added through the proxy would show here.
    static func faultRules(_ outbox: OutboxProcess) throws -> [JSONObject] {
        try JSONObject(outbox.admin("faults")).objects("faults") ?? []
    }

    @Test func aTargetThatIsTheMainListener_ByAddressOrName_Is508AndReachesNothing() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.forwardEverywhere)
        for authority in ["127.0.0.1:\(outbox.port)", "localhost:\(outbox.port)"] {
            Self.expectForwardingLoop(try Self.forward(outbox, authority), from: outbox)
            // A write to the admin API, had it got there, would leave a rule behind.
            let rule = try Self.forward(outbox, authority, "/admin/faults", method: "POST",
                                        headers: "Content-Type: application/json\r\n", body: #"{"action":"offline"}"#)
            Self.expectForwardingLoop(rule, from: outbox)
        }
        #expect(try Self.faultRules(outbox).isEmpty, "a request through the proxy reached the admin API\n\(outbox)")
        #expect(upstream.requests.isEmpty, "\(upstream.requests)")
    }

    @Test func aQueueableWriteToTheProxyItselfIs508AndNothingIsStored() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.forwardEverywhere)
        let authority = "127.0.0.1:\(outbox.port)"
        Self.expectForwardingLoop(try Self.forward(outbox, authority, "/items", method: "POST", body: "one"), from: outbox)
        // Even a write the client asks to have stored at once: the target is known now.
        let forced = try Self.forward(outbox, authority, "/items", method: "POST", headers: "Outbox-Mode: queue\r\n", body: "two")
        Self.expectForwardingLoop(forced, from: outbox)
        let listed = try JSONObject(outbox.admin("operations")).objects("operations") ?? []
        #expect(listed.isEmpty, "stored: \(listed)\n\(outbox)")
        #expect(upstream.requests.isEmpty, "\(upstream.requests)")
        // The proxy's own origin is not an unreachable one.
        let origins = try JSONObject(outbox.admin("status")).objects("origins") ?? []
        #expect(!origins.contains { $0.string("origin") == "http://\(authority)" && $0.bool("online") == false }, "\(origins)")
    }

    /// A write stored before its name was resolved (the client asked for it to be queued at
    /// once) is refused when it is replayed: the replay reaches nothing either, and the
    /// operation fails at its first attempt (a refusal is permanent: no retry is spent on it).
    @Test func aStoredWriteToTheProxyItselfIsRefusedWhenReplayed() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"reachability": {"probeIntervalSeconds": 0.1, "connectTimeoutSeconds": 1},
             "retry": {"preset": "immediate"},
             "forwardProxy": {"enabled": true, "allowedHosts": ["*"], "connectPorts": [443]}}
            """)
        let response = try Self.forward(outbox, "localhost:\(outbox.port)", "/admin/faults", method: "POST",
                                        headers: "Content-Type: application/json\r\nOutbox-Mode: queue\r\n",
                                        body: #"{"action":"offline"}"#)
        if response.status == 202 {
            let id = try #require(response.headers["Outbox-Operation-Id"], "\(response)")
            let failed = try await outbox.waitForOperation(id, toBe: ["failed"])
            #expect(failed.string("lastError")?.contains("Outbox's own listener") == true, "\(failed)")
            #expect(failed.int("retryCount") == 0 && failed.string("lastError")?.contains("retries exhausted") == false,
                    "a refused target was retried: \(failed)")
        } else {
            Self.expectForwardingLoop(response, from: outbox)
        }
        #expect(try Self.faultRules(outbox).isEmpty, "a replay reached the admin API\n\(outbox)")
    }

    @Test func withAdminListen_BothListenersAreRefusedAsTargets() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"admin": {"listen": "127.0.0.1:0"},
             "forwardProxy": {"enabled": true, "allowedHosts": ["*"], "connectPorts": [443]}}
            """)
        let adminPort = try outbox.adminPort()
        for authority in ["127.0.0.1:\(adminPort)", "localhost:\(adminPort)", "127.0.0.1:\(outbox.port)"] {
            Self.expectForwardingLoop(try Self.forward(outbox, authority, "/admin/faults"), from: outbox)
            let rule = try Self.forward(outbox, authority, "/admin/faults", method: "POST",
                                        headers: "Content-Type: application/json\r\n", body: #"{"action":"offline"}"#)
            Self.expectForwardingLoop(rule, from: outbox)
        }
        let rules = try outbox.sendToAdminListener("GET", "/admin/faults")
        #expect(try JSONObject(rules).objects("faults")?.isEmpty == true, "\(rules)\n\(outbox)")
        #expect(upstream.requests.isEmpty, "\(upstream.requests)")
    }

    @Test func connectToTheProxysOwnPortIs508() async throws {
        let port = try LocalPort.unused()
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["*"], "connectPorts": [\(port)]}}
            """, arguments: ["--listen", "127.0.0.1:\(port)"])
        for authority in ["127.0.0.1:\(port)", "localhost:\(port)"] {
            let client = try outbox.connect()
            try client.send("CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n\r\n")
            Self.expectForwardingLoop(try client.readResponse(to: "CONNECT"), from: outbox)
        }
    }

    /// A 0.0.0.0 listener takes connections for every local address: 127.0.0.1 and 127.0.0.2
    /// reach it as surely as its own address does.
    @Test func aWildcardListenerIsReachedByEveryLoopbackAddress() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.forwardEverywhere,
                                                   listenHost: "0.0.0.0")
        for authority in ["127.0.0.1:\(outbox.port)", "127.0.0.2:\(outbox.port)", "localhost:\(outbox.port)",
                          "0.0.0.0:\(outbox.port)"] {
            Self.expectForwardingLoop(try Self.forward(outbox, authority, "/admin/faults"), from: outbox)
        }
        #expect(upstream.requests.isEmpty, "\(upstream.requests)")
    }

    /// Chains of different Outbox instances stay possible: another port is another listener.
    @Test func anotherOutboxInstanceIsAnOrdinaryTarget() async throws {
        let origin = try TestUpstream { request in .respond(.text("origin saw \(request.target)")) }
        let second = try await OutboxProcess.start(upstream: origin.baseURL)
        let first = try await OutboxProcess.start(upstream: "http://127.0.0.1:9", config: Self.forwardEverywhere)
        let response = try Self.forward(first, "127.0.0.1:\(second.port)", "/chained")
        #expect(response.status == 200, "\(response)\n\(first)\n\(second)")
        #expect(response.bodyText == "origin saw /chained", "\(response)")
        let received = try #require(try await origin.waitForRequests(1).first)
        let hops = received.headers.values("Via").joined(separator: ",").split(separator: ",")
        #expect(hops.count == 2, "\(received.headers)")
    }

    // MARK: Wildcards and loopback targets

    @Test func onANonLoopbackListener_StarDoesNotReachLoopbackTargets() async throws {
        let target = try TestUpstream { _ in .respond(.text("loopback service")) }
        let echo = try EchoServer()
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["*"], "connectPorts": [\(echo.port)]}}
            """, listenHost: "0.0.0.0")
        for authority in [target.authority, "localhost:\(target.port)", "[::ffff:127.0.0.1]:\(target.port)"] {
            let response = try Self.forward(outbox, authority, "/secret")
            expectErrorResponse(response, status: 403, from: outbox)
            #expect(response.errorEnvelope?.code == "forbidden", "\(response)")
        }
        // A write as well: refused, not stored.
        let write = try Self.forward(outbox, target.authority, "/items", method: "POST", body: "x")
        expectErrorResponse(write, status: 403, from: outbox)
        let client = try outbox.connect()
        try client.send("CONNECT 127.0.0.1:\(echo.port) HTTP/1.1\r\nHost: 127.0.0.1:\(echo.port)\r\n\r\n")
        expectErrorResponse(try client.readResponse(to: "CONNECT"), status: 403, from: outbox)
        #expect(target.acceptedConnectionCount == 0, "the loopback target was reached: \(target.requests)")
        #expect(echo.acceptedConnectionCount == 0)
        let listed = try JSONObject(outbox.admin("operations")).objects("operations") ?? []
        #expect(listed.isEmpty, "stored: \(listed)")
        // The configured upstream is named exactly: reverse mode still reaches it on loopback.
        #expect(try outbox.send("GET", "/reverse").status == 200, "\(outbox)")
    }

    @Test func onANonLoopbackListener_ALoopbackTargetNamedExactlyIsForwarded() async throws {
        let target = try TestUpstream { request in .respond(.text("origin saw \(request.target)")) }
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: """
            {"forwardProxy": {"enabled": true, "allowedHosts": ["127.0.0.1", "*.example"], "connectPorts": [443]}}
            """, listenHost: "0.0.0.0")
        let response = try Self.forward(outbox, target.authority, "/named")
        #expect(response.status == 200, "\(response)\n\(outbox)")
        #expect(response.bodyText == "origin saw /named")
    }

    @Test func onTheDefaultLoopbackListener_StarReachesLoopbackTargetsAsBefore() async throws {
        let target = try TestUpstream { request in .respond(.text("origin saw \(request.target)")) }
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.forwardEverywhere)
        for authority in [target.authority, "localhost:\(target.port)"] {
            let response = try Self.forward(outbox, authority, "/wild")
            #expect(response.status == 200, "\(authority): \(response)\n\(outbox)")
            #expect(response.bodyText == "origin saw /wild")
        }
    }
}

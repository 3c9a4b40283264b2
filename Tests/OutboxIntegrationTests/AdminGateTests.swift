import Testing

/// The admin gate's DNS-rebinding and proxy-hop rules (SPEC §5) through the real binary: a
/// `Host` is accepted only as exact loopback syntax or the listen address, and without a token
/// a request that came through a proxy is refused whatever its peer.
@Suite("Admin gate: rebinding names and proxy hops", .harnessThreads)
struct AdminGateTests {
    /// `method /admin/<path>` from loopback with `Host: host` and the matching `Origin` a
    /// browser would send from a page at that name.
    static func sendAsPage(_ outbox: OutboxProcess, host: String, _ method: String = "GET", _ path: String = "status",
                           body: String = "", extra: String = "") throws -> HTTPResponse {
        try outbox.exchange("\(method) /admin/\(path) HTTP/1.1\r\nHost: \(host)\r\nOrigin: http://\(host)\r\n\(extra)"
            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)", method: method)
    }

    @Test func aRebindingNameIsRefused_OnReadsAndOnWrites() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let rebound = "127.attacker.example:\(outbox.port)"
        expectErrorResponse(try Self.sendAsPage(outbox, host: rebound), status: 403, from: outbox)
        let write = try Self.sendAsPage(outbox, host: rebound, "POST", "faults", body: #"{"action":"offline"}"#)
        expectErrorResponse(write, status: 403, from: outbox)
        let rules = try JSONObject(outbox.admin("faults")).objects("faults") ?? []
        #expect(rules.isEmpty, "the rebound page added a fault rule: \(rules)")
    }

    @Test(arguments: ["localhost.attacker.example", "127.0.0.1.nip.io", "0x7f.1", "127.1", "127.attacker.example"])
    func aNameThatIsNotExactlyLoopbackIsRefused(name: String) async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        for host in [name, "\(name):\(outbox.port)"] {
            let response = try Self.sendAsPage(outbox, host: host)
            expectErrorResponse(response, status: 403, from: outbox)
            #expect(response.errorEnvelope?.code == "forbidden", "\(host): \(response)")
        }
    }

    @Test func loopbackLiteralsLocalhostAndTheListenAddressAreAccepted() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        for host in ["localhost", "localhost:\(outbox.port)", "127.0.0.1:\(outbox.port)", "127.1.2.3",
                     "[::1]:\(outbox.port)", "[::1]"] {
            let response = try Self.sendAsPage(outbox, host: host)
            #expect(response.status == 200, "\(host): \(response)\n\(outbox)")
        }
    }

    @Test(arguments: ["Via: 1.1 some-proxy", "Forwarded: for=192.0.2.60;proto=http"])
    func aRequestThatCameThroughAProxyIsRefusedWithoutAToken(field: String) async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let response = try outbox.exchange("GET /admin/status HTTP/1.1\r\nHost: 127.0.0.1:\(outbox.port)\r\n\(field)\r\n\r\n")
        expectErrorResponse(response, status: 403, from: outbox)
        #expect(response.errorEnvelope?.code == "forbidden", "\(response)")
        #expect(response.errorEnvelope?.message.contains("proxy") == true, "\(response)")
    }

    @Test(arguments: ["Via: 1.1 some-proxy", "Forwarded: for=192.0.2.60;proto=http"])
    func aRequestThatCameThroughAProxyIsServedWithTheToken(field: String) async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: #"{"admin": {"token": "s3cret-token"}}"#)
        let response = try outbox.exchange("GET /admin/status HTTP/1.1\r\nHost: 127.0.0.1:\(outbox.port)\r\n\(field)\r\n"
            + "Authorization: Bearer s3cret-token\r\n\r\n")
        #expect(response.status == 200, "\(response)\n\(outbox)")
    }
}

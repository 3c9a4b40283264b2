@testable import OutboxAdmin
@testable import OutboxConfig
@testable import OutboxHTTP
import Testing

/// The admin API's `Host` check names the address of the listener that serves the API: the
/// main `listen` address, or `admin.listen` once that is set. Non-loopback addresses are used
/// here because loopback names pass the check on any listener.
@Suite("Admin gate: the Host of the listener serving the API")
struct AdminGateHostTests {
    static func refusalStatus(host: String, config: OutboxConfig) -> Int? {
        var headers = HTTPHeaders()
        headers.add("Host", host)
        let head = HTTPRequestHead(method: "GET", target: "/admin/status", headers: headers)
        return AdminGate(config: config).refusal(for: head, peerIsLoopback: true)?.status
    }

    @Test func withoutAdminListenTheMainListenAddressIsAccepted() {
        var config = OutboxConfig()
        config.listen = SocketAddressSpec(host: "10.1.2.3", port: 8080)
        #expect(Self.refusalStatus(host: "10.1.2.3:8080", config: config) == nil)
        #expect(Self.refusalStatus(host: "10.9.9.9:9090", config: config) == 403)
    }

    @Test func withAdminListenItsAddressIsAcceptedAndTheMainOneIsNot() {
        var config = OutboxConfig()
        config.listen = SocketAddressSpec(host: "10.1.2.3", port: 8080)
        config.admin.listen = SocketAddressSpec(host: "outbox-admin.internal", port: 9090)
        #expect(Self.refusalStatus(host: "outbox-admin.internal:9090", config: config) == nil)
        #expect(Self.refusalStatus(host: "OUTBOX-ADMIN.internal:9090", config: config) == nil)
        #expect(Self.refusalStatus(host: "10.1.2.3:8080", config: config) == 403)
        #expect(Self.refusalStatus(host: "127.0.0.1:9090", config: config) == nil)
    }

    /// SPEC §5: exact syntax. A rebinding page sends its own name as Host (and Origin), so
    /// anything that merely starts like a loopback address is a name, not loopback.
    static let accepted = [
        "localhost", "localhost:8080", "LOCALHOST:8080", "127.0.0.1", "127.0.0.1:8080", "127.1.2.3",
        "127.255.255.255:65535", "[::1]", "[::1]:8080", "10.1.2.3:8080",
    ]
    static let refused = [
        "127.attacker.example:8080", "127.attacker.example", "localhost.attacker.example", "127.0.0.1.nip.io",
        "0x7f.1", "0x7f000001", "127.1", "2130706433", "0177.0.0.1", "127.000.0.1", "128.0.0.1", "::1", "[::1",
        "[0:0:0:0:0:0:0:1]", "[::2]", "localhost.", "localhost:", "localhost:0", "localhost:65536",
        "127.0.0.1:8080:80", "", "10.1.2.4", "user@localhost", "localhost/x",
    ]

    @Test(arguments: accepted)
    func anExactLoopbackHostOrTheListenAddressIsAccepted(host: String) {
        var config = OutboxConfig()
        config.listen = SocketAddressSpec(host: "10.1.2.3", port: 8080)
        #expect(Self.refusalStatus(host: host, config: config) == nil, "\(host)")
    }

    @Test(arguments: refused)
    func aHostThatIsNotExactlyLoopbackOrTheListenAddressIsRefused(host: String) {
        var config = OutboxConfig()
        config.listen = SocketAddressSpec(host: "10.1.2.3", port: 8080)
        #expect(Self.refusalStatus(host: host, config: config) == 403, "\(host)")
    }

    static func refusal(_ fields: [(String, String)], config: OutboxConfig = OutboxConfig()) -> AdminError? {
        var headers = HTTPHeaders()
        for (name, value) in fields { headers.add(name, value) }
        let head = HTTPRequestHead(method: "GET", target: "/admin/status", headers: headers)
        return AdminGate(config: config).denial(for: head, peerIsLoopback: true)
    }

    @Test func theOriginMustBeTheHostItself_InTheSameExactSyntax() {
        #expect(Self.refusal([("Host", "127.0.0.1:8080"), ("Origin", "http://127.0.0.1:8080")]) == nil)
        #expect(Self.refusal([("Host", "localhost:8080"), ("Origin", "http://LOCALHOST:8080")]) == nil)
        #expect(Self.refusal([("Host", "127.0.0.1:8080"), ("Origin", "http://localhost:8080")])
                == .crossSiteOrigin("http://localhost:8080"))
        #expect(Self.refusal([("Host", "127.0.0.1:8080"), ("Origin", "https://127.0.0.1:8080")])
                == .crossSiteOrigin("https://127.0.0.1:8080"))
        #expect(Self.refusal([("Host", "127.0.0.1:8080"), ("Origin", "null")]) == .crossSiteOrigin("null"))
        #expect(Self.refusal([("Host", "127.attacker.example:8080"), ("Origin", "http://127.attacker.example:8080")])
                == .foreignHost("127.attacker.example:8080"))
    }

    @Test(arguments: ["Via", "Forwarded", "via"])
    func aProxyHopIsRefusedWithoutATokenAndServedWithIt(field: String) {
        let fields = [("Host", "127.0.0.1:8080"), (field, "1.1 elsewhere")]
        #expect(Self.refusal(fields) == .proxied)
        var config = OutboxConfig()
        config.admin.token = "t0ken"
        #expect(Self.refusal(fields + [("Authorization", "Bearer t0ken")], config: config) == nil)
    }
}

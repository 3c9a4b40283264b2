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
}

import Foundation
@testable import OutboxConfig
import Testing

/// The configs shipped in `docker/`: a container is reachable from a network, so neither may
/// make Outbox an open proxy (to the internet, or to the container's loopback services).
@Suite("docker/ configs")
struct DockerConfigTests {
    static let docker = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docker")

    @Test(arguments: ["image-config.json", "config.json", "config-postgres.json"])
    func aDockerConfigParsesListensOnAllAddressesAndTurnsTheForwardProxyOff(file: String) throws {
        let bytes = try [UInt8](Data(contentsOf: Self.docker.appendingPathComponent(file)))
        let config = try OutboxConfig.parse(json: bytes)
        #expect(config.listen == SocketAddressSpec(host: "0.0.0.0", port: 8080))
        #expect(config.dataDirectory == "/var/lib/outbox")
        #expect(!config.forwardProxy.enabled, "\(file) leaves the forward proxy on")
    }
}

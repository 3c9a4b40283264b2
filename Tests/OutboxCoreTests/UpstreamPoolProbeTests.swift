import Glibc
import OutboxHTTP
@testable import OutboxModel
@testable import OutboxNet
import Testing

/// Of a name's several addresses, the pool connects to find the first that answers; that
/// connection then serves the first call, so the origin sees one connection carrying the
/// request, not an empty one before it (and the call saves a handshake). Real sockets on
/// loopback; the name's addresses come from the pool's resolver seam.
@Suite struct UpstreamPoolProbeTests {
    final class OneLoop: UpstreamLoop {
        let loop: EventLoop
        let pool: UpstreamPool
        var replayTransport: UpstreamTransport { pool }

        init(loop: EventLoop, pool: UpstreamPool) {
            self.loop = loop
            self.pool = pool
        }
    }

    /// Reads from `fd` until a request head ends or the peer ends (bounded by `poll`).
    static func readHead(_ fd: Int32) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !bytes.ends(with: Array("\r\n\r\n".utf8)) {
            var readable = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            try #require(poll(&readable, 1, 10_000) == 1, "nothing from the pool's connection in 10 s")
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes += chunk[..<count]
        }
        return bytes
    }

    @Test func theConnectionThatFoundTheAddress_CarriesTheFirstRequest() async throws {
        let refusing = try AddressFallbackTests.Refusing()
        let listening = try AddressFallbackTests.Listening()
        let loop = try EventLoop(index: 0, sweepInterval: 1)
        loop.start()
        defer {
            loop.stop()
            loop.join()
        }
        let addresses = [refusing.address, listening.address]
        let pool = UpstreamPool(loop: loop, timeouts: UpstreamTimeouts(connect: 5, response: 10, poolIdle: 30),
                                maxHeaderBytes: 65_536, tlsContext: nil, resolve: { _, _ in addresses })
        let client = UpstreamClient(loops: [LoopBound(value: OneLoop(loop: loop, pool: pool), loop: loop)])
        let origin = Origin(scheme: .http, host: "two-addresses.test", port: listening.address.port)
        let head = HTTPRequestHead(method: "GET", target: "/first", headers: ["Host": "two-addresses.test"])
        let call = Task { await client.send(to: origin, head: head, body: [], maxResponseBytes: 1024, purpose: .probe) }

        // Every connection the origin accepts, until one brings the request.
        var accepted = 0
        var carrier: Int32 = -1
        while carrier < 0 {
            var pending = pollfd(fd: listening.fd, events: Int16(POLLIN), revents: 0)
            try #require(poll(&pending, 1, 10_000) == 1, "no connection in 10 s")
            let fd = accept(listening.fd, nil, nil)
            try #require(fd >= 0)
            accepted += 1
            if String(decoding: try Self.readHead(fd), as: UTF8.self).hasPrefix("GET /first ") { carrier = fd } else { close(fd) }
        }
        let answer = Array("HTTP/1.1 204 No Content\r\n\r\n".utf8)
        #expect(answer.withUnsafeBytes { write(carrier, $0.baseAddress, $0.count) } == answer.count)
        let result = await call.value
        close(carrier)
        let owned = LoopBound(value: pool, loop: loop)
        loop.execute { owned.value.closeIdle() }

        #expect((try? result.get())?.head.status == 204, "\(result)")
        #expect(accepted == 1, "the origin accepted \(accepted) connections for one request")
    }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}

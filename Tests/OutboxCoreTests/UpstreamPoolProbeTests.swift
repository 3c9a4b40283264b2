import Foundation
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

    /// What the origin saw: connections accepted until one brought a request head (that one
    /// is answered `204`), or why it saw none.
    struct Served {
        var accepted = 0
        var failure: String?
    }

    /// Blocking, bounded by `poll`.
    static func serveOneRequest(on listener: Int32) -> Served {
        var served = Served()
        while true {
            var pending = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&pending, 1, 20_000) == 1 else { return Served(accepted: served.accepted, failure: "no connection in 20 s") }
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return Served(accepted: served.accepted, failure: "accept: errno \(errno)") }
            served.accepted += 1
            guard let head = readHead(fd) else {
                close(fd)
                return Served(accepted: served.accepted, failure: "nothing from a connection in 20 s")
            }
            guard String(decoding: head, as: UTF8.self).hasPrefix("GET /first ") else {
                close(fd)
                continue
            }
            let answer = Array("HTTP/1.1 204 No Content\r\n\r\n".utf8)
            _ = answer.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            return served
        }
    }

    /// Reads from `fd` until a request head ends or the peer ends; nil when nothing comes in 20 s.
    static func readHead(_ fd: Int32) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !bytes.ends(with: Array("\r\n\r\n".utf8)) {
            var readable = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&readable, 1, 20_000) == 1 else { return nil }
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
        let pool = UpstreamPool(loop: loop, timeouts: UpstreamTimeouts(connect: 5, response: 30, poolIdle: 30),
                                maxHeaderBytes: 65_536, tlsContext: nil, resolve: { _, _ in addresses })
        let client = UpstreamClient(loops: [LoopBound(value: OneLoop(loop: loop, pool: pool), loop: loop)])
        let origin = Origin(scheme: .http, host: "two-addresses.test", port: listening.address.port)
        let head = HTTPRequestHead(method: "GET", target: "/first", headers: ["Host": "two-addresses.test"])

        // The origin's side blocks (in `poll`), so it gets a thread of its own, started before
        // the request: neither Swift's cooperative pool nor Dispatch's, which other tests may
        // hold on a busy machine for longer than the response timeout.
        let listener = listening.fd
        let served = ThreadResult { Self.serveOneRequest(on: listener) }
        let result = await client.send(to: origin, head: head, body: [], maxResponseBytes: 1024, purpose: .probe)
        let origins = await served.value
        let owned = LoopBound(value: pool, loop: loop)
        loop.execute { owned.value.closeIdle() }

        #expect(origins.failure == nil, "\(origins)")
        #expect((try? result.get())?.head.status == 204, "\(result)")
        #expect(origins.accepted == 1, "the origin accepted \(origins.accepted) connections for one request")
    }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}

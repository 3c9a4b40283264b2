import CSystem
import Dispatch
import Glibc
import OutboxModel

/// The connect probe that tells the reachability tracker (in the queue layer, which knows no
/// sockets) whether an offline origin is back: a TCP connect, and for an `https://` origin a
/// complete TLS handshake too, since a captive portal or a wrong certificate accepts TCP but
/// can serve no request.
package enum TCPProbe {
    /// True when `origin` accepts a connection (and a handshake) within `timeout` each. Runs the
    /// blocking name lookup, connect and handshake on a Dispatch worker, never on an event loop
    /// or Swift's cooperative pool. `tls` gives the context https origins are checked with.
    package static func make(timeout: Double,
                             tls: @escaping @Sendable () -> TLSContext?) -> @Sendable (Origin) async -> Bool {
        { origin in
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(returning: probe(origin, timeout: timeout, tls: tls))
                }
            }
        }
    }

    private static func probe(_ origin: Origin, timeout: Double, tls: () -> TLSContext?) -> Bool {
        let addresses = SocketAddress.resolveNumeric(origin.host, port: origin.port).map { [$0] }
            ?? SocketAddress.resolve(host: origin.host, port: origin.port)
        return probe(origin, at: addresses, timeout: timeout, tls: tls)
    }

    /// Tries `addresses` in order, `timeout` each: the origin is back when one of them accepts
    /// (and, for https, completes a handshake). A name's first address may be one the origin
    /// does not listen on (`::1` for a server bound to IPv4 only).
    static func probe(_ origin: Origin, at addresses: [SocketAddress], timeout: Double, tls: () -> TLSContext?) -> Bool {
        for address in addresses {
            guard let fd = Sockets.connectAndWait(to: address, until: Sockets.deadline(after: timeout)) else { continue }
            defer { close(fd) }
            guard origin.scheme == .https else { return true }
            guard let context = tls(), let engine = try? TLSEngine(clientOf: context, host: origin.host) else { return false }
            if handshakes(engine, fd: fd, until: Sockets.deadline(after: timeout)) { return true }
        }
        return false
    }

    /// Drives the handshake over the (non-blocking) socket until it completes, fails or the
    /// deadline passes.
    private static func handshakes(_ engine: TLSEngine, fd: Int32, until end: UInt64) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let step = engine.handshake()
            var pending = engine.drainOutput()[...]
            while !pending.isEmpty {
                let sent = pending.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent > 0 {
                    pending = pending.dropFirst(sent)
                } else if sent < 0 && (errno == EAGAIN || errno == EINTR) {
                    guard Sockets.wait(fd, for: POLLOUT, until: end) else { return false }
                } else {
                    return false
                }
            }
            switch step {
            case .complete: return true
            case .failed: return false
            case .wantRead, .wantWrite:
                guard Sockets.wait(fd, for: POLLIN, until: end) else { return false }
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count > 0 {
                    buffer.withUnsafeBytes { engine.feed(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
                    return false
                }
            }
        }
    }
}

import Dispatch
import Glibc
import OutboxModel

/// The TCP connect probe that tells the reachability tracker (in the queue layer, which knows
/// no sockets) whether an offline origin is back.
package enum TCPProbe {
    /// A TCP connect probe: true when `origin` accepts a connection within `timeout`. Runs the
    /// (blocking) name lookup and connect on a Dispatch worker, never on an event loop.
    package static func make(timeout: Double) -> @Sendable (Origin) async -> Bool {
        { origin in
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(returning: connects(origin, timeout: timeout))
                }
            }
        }
    }

    private static func connects(_ origin: Origin, timeout: Double) -> Bool {
        let addresses = SocketAddress.resolveNumeric(origin.host, port: origin.port).map { [$0] }
            ?? SocketAddress.resolve(host: origin.host, port: origin.port)
        guard let address = addresses.first, case .success(let fd) = Sockets.connect(to: address) else { return false }
        defer { close(fd) }
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&poller, 1, Int32(max(1, timeout * 1000))) == 1 else { return false }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        return error == 0
    }
}

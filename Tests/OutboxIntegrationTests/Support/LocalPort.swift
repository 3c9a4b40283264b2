import Glibc

/// Ports for tests that are about ports: one held busy by a listener of ours, one known to have
/// nothing listening. Everything else binds 127.0.0.1:0.
enum LocalPort {
    /// A listening socket that keeps its port busy until released.
    final class Reservation {
        let port: UInt16
        private let fd: Int32

        fileprivate init(fd: Int32, port: UInt16) {
            self.fd = fd
            self.port = port
        }

        deinit {
            close(fd)
        }
    }

    /// Binds and listens on a free port and keeps it.
    static func reserve() throws -> Reservation {
        let (fd, port) = try Socket.listen()
        return Reservation(fd: fd, port: port)
    }

    /// A port held by a bound socket that does not listen: connecting is refused, and no other
    /// test can be handed the port while the reservation lives (parallel tests would otherwise
    /// race for a port "known" to be dead).
    static func refusing() throws -> Reservation {
        let fd = Socket.bindOnly(port: 0)
        guard fd >= 0 else { throw HarnessError("cannot bind a refusing port") }
        do {
            return Reservation(fd: fd, port: try Socket.localPort(of: fd))
        } catch {
            close(fd)
            throw error
        }
    }

    /// A port that was free a moment ago and has no listener, for a test that must bind it
    /// itself (another process could take it meanwhile: prefer `refusing()` for dead ports).
    static func unused() throws -> UInt16 {
        let (fd, port) = try Socket.listen()
        close(fd)
        return port
    }
}

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

    /// A port that was free a moment ago and has no listener: connecting to it is refused.
    static func unused() throws -> UInt16 {
        let (fd, port) = try Socket.listen()
        close(fd)
        return port
    }
}

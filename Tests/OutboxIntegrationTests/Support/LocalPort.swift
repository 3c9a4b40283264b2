import Foundation
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

    /// A port that was free a moment ago and has no listener, for a test that must have
    /// another process bind it (prefer `refusing()` for dead ports). It is drawn from below
    /// the kernel's ephemeral range (`ip_local_port_range`), so the ports that parallel tests
    /// get from bind(0) and connect(2) can never take it in the meantime.
    static func unused() throws -> UInt16 {
        let ephemeralStart = firstEphemeralPort()
        let low: UInt16 = 10_000
        guard ephemeralStart > low + 100 else { throw HarnessError("no ports below the ephemeral range \(ephemeralStart)") }
        for _ in 0..<200 {
            let candidate = UInt16.random(in: low..<ephemeralStart)
            if let (fd, port) = try? Socket.listen(port: candidate) {
                close(fd)
                return port
            }
        }
        throw HarnessError("no free port in \(low)..<\(ephemeralStart) after 200 tries")
    }

    /// The first port of /proc/sys/net/ipv4/ip_local_port_range (32768 when unreadable).
    private static func firstEphemeralPort() -> UInt16 {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        return text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap { UInt16($0) } ?? 32768
    }
}

import Glibc
import OutboxModel
@testable import OutboxNet
import Testing

/// A name may list an address its server does not listen on first (`localhost` as `::1` for
/// a server bound to IPv4 only): the pool and the reachability probe go on to the next one.
/// Real sockets on loopback: one that listens, and one bound but not listening, which refuses.
@Suite struct AddressFallbackTests {
    /// A loopback port that accepts connections (the kernel completes the handshake).
    final class Listening {
        let fd: Int32
        let address: SocketAddress

        init() throws {
            (fd, address) = try Sockets.listen(host: "127.0.0.1", port: 0)
        }

        deinit { close(fd) }
    }

    /// A loopback port that refuses: bound, so nobody else takes it, but not listening.
    final class Refusing {
        let fd: Int32
        let address: SocketAddress

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            self.fd = fd
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
            }
            try #require(bound)
            self.address = try #require(SocketAddress.resolveNumeric("127.0.0.1", port: Int(UInt16(bigEndian: address.sin_port))))
        }

        deinit { close(fd) }
    }

    @Test func theFirstAddressThatAccepts_MovesToTheFront() throws {
        let refusing = try Refusing()
        let listening = try Listening()
        let ordered = Sockets.reachableFirst([refusing.address, listening.address], timeout: 5)
        #expect(ordered.map(\.port) == [listening.address.port, refusing.address.port])
    }

    @Test func anAnsweringFirstAddress_AndNoAnsweringAddress_LeaveTheOrderAlone() throws {
        let refusing = try Refusing()
        let other = try Refusing()
        let listening = try Listening()
        let first = Sockets.reachableFirst([listening.address, refusing.address], timeout: 5)
        #expect(first.map(\.port) == [listening.address.port, refusing.address.port])
        let none = Sockets.reachableFirst([refusing.address, other.address], timeout: 5)
        #expect(none.map(\.port) == [refusing.address.port, other.address.port])
    }

    @Test func theProbe_FindsTheOriginBack_AtItsSecondAddress() throws {
        let refusing = try Refusing()
        let listening = try Listening()
        let origin = Origin(scheme: .http, host: "localhost", port: listening.address.port)
        #expect(TCPProbe.probe(origin, at: [refusing.address, listening.address], timeout: 5, tls: { nil }))
        #expect(!TCPProbe.probe(origin, at: [refusing.address], timeout: 5, tls: { nil }))
    }
}

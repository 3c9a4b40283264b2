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

    /// The port at the other end of a connected socket.
    static func peerPort(_ fd: Int32) -> Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test func theFirstAddressThatAccepts_MovesToTheFront_WithTheConnectionThatFoundIt() throws {
        let refusing = try Refusing()
        let listening = try Listening()
        let reached = Sockets.reachableFirst([refusing.address, listening.address], timeout: 5)
        #expect(reached.addresses.map(\.port) == [listening.address.port, refusing.address.port])
        let connected = try #require(reached.connected)
        defer { close(connected) }
        #expect(Self.peerPort(connected) == listening.address.port)
        #expect(Sockets.isStillOpen(connected))
    }

    @Test func anAnsweringFirstAddress_AndNoAnsweringAddress_LeaveTheOrderAlone() throws {
        let refusing = try Refusing()
        let other = try Refusing()
        let listening = try Listening()
        let first = Sockets.reachableFirst([listening.address, refusing.address], timeout: 5)
        #expect(first.addresses.map(\.port) == [listening.address.port, refusing.address.port])
        if let connected = first.connected { close(connected) }
        let none = Sockets.reachableFirst([refusing.address, other.address], timeout: 5)
        #expect(none.addresses.map(\.port) == [refusing.address.port, other.address.port])
        #expect(none.connected == nil)
        // One address is used as it is: nothing to choose, so nothing is connected.
        #expect(Sockets.reachableFirst([listening.address], timeout: 5).connected == nil)
    }

    @Test func aConnectionItsPeerEnded_IsNotStillOpen() throws {
        let listening = try Listening()
        let fd = try Sockets.connectAndWait(to: listening.address, until: Sockets.deadline(after: 5)).get()
        defer { close(fd) }
        #expect(Sockets.isStillOpen(fd))
        var pending = pollfd(fd: listening.fd, events: Int16(POLLIN), revents: 0)
        try #require(poll(&pending, 1, 5_000) == 1)
        let accepted = accept(listening.fd, nil, nil)
        try #require(accepted >= 0)
        close(accepted)
        // The peer's FIN makes the socket readable.
        var finished = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        try #require(poll(&finished, 1, 5_000) == 1)
        #expect(!Sockets.isStillOpen(fd))
    }

    @Test func theProbe_FindsTheOriginBack_AtItsSecondAddress() throws {
        let refusing = try Refusing()
        let listening = try Listening()
        let origin = Origin(scheme: .http, host: "localhost", port: listening.address.port)
        #expect(TCPProbe.probe(origin, at: [refusing.address, listening.address], timeout: 5, tls: { nil }) == .answered)
        #expect(TCPProbe.probe(origin, at: [refusing.address], timeout: 5, tls: { nil }) == .unanswered)
    }
}

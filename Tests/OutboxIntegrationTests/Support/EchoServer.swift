/// A TCP echo server on 127.0.0.1:0: the far end of CONNECT tunnel tests.
final class EchoServer: Sendable {
    private let acceptor: ConnectionAcceptor

    /// Starts listening; every connection gets back each byte it sends until it closes.
    init() throws {
        acceptor = try ConnectionAcceptor { connection in
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = (try? buffer.withUnsafeMutableBytes {
                    try Socket.receive(connection.fd, into: $0, deadline: nil)
                }) ?? 0
                if count == 0 { return }
                do {
                    try buffer.withUnsafeBytes {
                        try Socket.sendAll(connection.fd, UnsafeRawBufferPointer(rebasing: $0[0..<count]), deadline: nil)
                    }
                } catch {
                    return
                }
            }
        }
    }

    /// The port it listens on.
    var port: UInt16 { acceptor.port }

    /// Connections accepted so far.
    var acceptedConnectionCount: Int { acceptor.acceptedConnectionCount }

    /// Closes the listener and all connections.
    func stop() {
        acceptor.stop()
    }
}

import Foundation
import Glibc
import Synchronization

/// A TCP listener on 127.0.0.1 that accepts on its own thread and serves each connection on a
/// new thread. It owns every descriptor: a connection's fd is closed exactly once, under the
/// lock, after its handler returns, so `stop()` can shutdown(2) live sockets (waking blocked
/// reads) without ever touching a number the kernel has already handed to someone else.
final class ConnectionAcceptor: Sendable {
    /// What a connection handler gets: its descriptor (never to be closed by the handler) and a
    /// way to learn that the server is stopping, for handlers that wait on a gate.
    struct Connection: Sendable {
        let id: Int
        let fd: Int32
        let isRunning: @Sendable () -> Bool
    }

    /// The port, fixed for the acceptor's life so that a restart comes back on the same one.
    let port: UInt16
    private let core: Core
    /// While stopped, a bound (not listening) socket keeps the port: connections are refused,
    /// and no other test's `bind(port 0)` can be handed this port meanwhile (the kernel's
    /// ephemeral search skips ports with a bound socket), which would answer in our place.
    /// Listener and placeholder share the port through SO_REUSEPORT, so each is bound before
    /// the other is closed: the port is never free for a moment.
    private let placeholder = Mutex<Int32>(-1)

    /// Binds 127.0.0.1:0 and starts accepting.
    init(handler: @escaping @Sendable (Connection) -> Void) throws {
        let (listener, port) = try Socket.listen(reusePort: true)
        self.port = port
        core = Core(handler: handler)
        core.start(listener: listener)
    }

    deinit {
        core.stop()
        placeholder.withLock { fd in
            if fd >= 0 { close(fd) }
        }
    }

    /// Connections accepted since creation, across restarts.
    var acceptedConnectionCount: Int { core.state.withLock { $0.acceptedCount } }

    /// Whether the listener is up.
    var isRunning: Bool { core.state.withLock { $0.running } }

    /// Closes the listener and every open connection, and waits until the accept thread is gone
    /// so the port can be bound again at once.
    func stop() {
        placeholder.withLock { fd in
            if fd < 0 { fd = Socket.bindOnly(port: port, reusePort: true) }
        }
        core.stop()
    }

    /// Listens on the same port again after `stop()`.
    func restart() throws {
        guard !isRunning else { return }
        let (listener, _) = try Socket.listen(port: port, reusePort: true)
        placeholder.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
        core.start(listener: listener)
    }

    /// The shared part that threads capture, so that the owner's deinit can run and stop them.
    private final class Core: Sendable {
        struct State {
            var listener: Int32 = -1
            var connections: [Int: Int32] = [:]
            var nextID = 0
            var acceptedCount = 0
            var running = false
        }

        let state = Mutex(State())
        let acceptThreads = WaitableState(0)
        let handler: @Sendable (Connection) -> Void

        init(handler: @escaping @Sendable (Connection) -> Void) {
            self.handler = handler
        }

        func start(listener: Int32) {
            state.withLock { state in
                state.listener = listener
                state.running = true
            }
            acceptThreads.update { $0 += 1 }
            Thread { [self] in acceptLoop(listener: listener) }.start()
        }

        func stop() {
            state.withLock { state in
                state.running = false
                // shutdown(2) wakes the thread blocked in accept(2) or recv(2); the owning
                // thread then closes the descriptor.
                if state.listener >= 0 { shutdown(state.listener, Int32(SHUT_RDWR)) }
                for fd in state.connections.values { shutdown(fd, Int32(SHUT_RDWR)) }
            }
            _ = acceptThreads.waitBlocking(timeout: .seconds(5)) { $0 == 0 ? true : nil }
        }

        private func acceptLoop(listener: Int32) {
            while let fd = Socket.accept(listener) {
                let id: Int? = state.withLock { state in
                    guard state.running, state.listener == listener else {
                        close(fd)
                        return nil
                    }
                    let id = state.nextID
                    state.nextID += 1
                    state.acceptedCount += 1
                    state.connections[id] = fd
                    return id
                }
                guard let id else { continue }
                let connection = Connection(id: id, fd: fd, isRunning: { [self] in state.withLock { $0.running } })
                Thread { [self] in
                    handler(connection)
                    state.withLock { state in
                        if let fd = state.connections.removeValue(forKey: id) { close(fd) }
                    }
                }.start()
            }
            state.withLock { state in
                close(listener)
                if state.listener == listener { state.listener = -1 }
            }
            acceptThreads.update { $0 -= 1 }
        }
    }
}

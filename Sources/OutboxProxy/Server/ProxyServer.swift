import CSystem
import Dispatch
import Glibc
import OutboxConfig
import OutboxCredentials
import OutboxFaults
import OutboxNet
import OutboxQueue
import OutboxTelemetry
import Synchronization

/// The proxy server: a listening socket (two with `admin.listen`: the admin API gets its own)
/// and one event loop per core, each loop serving the connections handed to it round-robin.
///
/// `start()` binds and returns the real addresses (port 0 resolved); `shutdown(timeout:)`
/// stops accepting on every listener, lets in-flight exchanges finish within the grace period,
/// then closes everything. No thread per connection: `loopCount` threads in all.
public final class ProxyServer: @unchecked Sendable {
    // Set in start() before any loop runs, read-only afterwards.
    private var loops: [EventLoop] = []
    private var states: [LoopBound<ProxyLoop>] = []
    private var listeners: [LoopBound<Listener>] = []
    /// How `https://` origins are reached, built from `tls` at start; shared by every loop.
    package private(set) var upstreamTLS: TLSContext?
    private let config: OutboxConfig
    private let logger: Logger
    private let queue: QueueGateway?
    private let credentials: CredentialBook?
    private let admin: (any AdminEndpoint)?
    private let leafIssuer: LeafCertificateIssuer?
    private let metrics: Metrics
    private let faults: FaultBook
    private let events: EventHub?
    private let loopCount: Int
    /// Per listener: a proxy at `limits.maxConnections` must not lock the operator out of the
    /// admin listener (`admin.listen`), which has a count of its own.
    private let openConnections = Atomic<Int>(0)
    private let openAdminConnections = Atomic<Int>(0)
    private let drainedLoops = Atomic<Int>(0)
    private let drained = DispatchSemaphore(value: 0)

    /// - Parameter loopCount: event loop threads; defaults to the number of CPU cores.
    /// - Parameter queue: the durable queue; nil runs a plain proxy.
    /// - Parameter admin: the admin API, served under `admin.pathPrefix`; nil without a queue.
    /// - Parameter leafIssuer: the certificates for intercepted `CONNECT` hosts; nil intercepts none.
    package init(config: OutboxConfig, logger: Logger, queue: QueueGateway?, leafIssuer: LeafCertificateIssuer? = nil,
                 admin: (any AdminEndpoint)? = nil, metrics: Metrics = Metrics(), faults: FaultBook = FaultBook(),
                 events: EventHub? = nil, credentials: CredentialBook? = nil, loopCount: Int? = nil) {
        self.credentials = credentials
        self.faults = faults
        self.events = events
        self.leafIssuer = leafIssuer
        self.config = config
        self.logger = logger
        self.queue = queue
        self.admin = admin
        self.metrics = metrics
        self.loopCount = max(1, loopCount ?? Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    /// A plain proxy, without a queue.
    public convenience init(config: OutboxConfig, logger: Logger, loopCount: Int? = nil) {
        self.init(config: config, logger: logger, queue: nil, loopCount: loopCount)
    }

    /// One-shot exchanges on this server's loops (replays, probes). Valid after `start()`.
    package var upstreamClient: UpstreamClient { UpstreamClient(loops: states.map { LoopBound(value: $0.value, loop: $0.loop) }) }

    /// Binds `listen` (and `admin.listen` when set) and starts the loops. Returns the bound
    /// addresses. Both sockets are bound before anything accepts, so a busy admin port fails the
    /// start as a busy main port does.
    public func start() throws(ServerStartError) -> (main: SocketAddressSpec, admin: SocketAddressSpec?) {
        var sockets: [(fd: Int32, role: ListenerRole, address: SocketAddressSpec, bound: SocketAddress)] = []
        func closeAll() { for socket in sockets { close(socket.fd) } }
        do {
            let (fd, address) = try Sockets.listen(host: config.listen.host, port: config.listen.port)
            sockets.append((fd, .main, SocketAddressSpec(host: address.hostText, port: address.port), address))
        } catch {
            throw .listen(config.listen, error)
        }
        if let adminListen = config.admin.listen {
            do {
                let (fd, address) = try Sockets.listen(host: adminListen.host, port: adminListen.port)
                sockets.append((fd, .admin, SocketAddressSpec(host: address.hostText, port: address.port), address))
            } catch {
                closeAll()
                throw .adminListen(adminListen, error)
            }
        }
        let adminAddress = sockets.first { $0.role == .admin }?.address
        let upstreamTLS: TLSContext
        do {
            upstreamTLS = try TLSContext.upstream(config.tls)
        } catch {
            closeAll()
            throw .tls(error.reason)
        }
        self.upstreamTLS = upstreamTLS
        let context = ProxyContext(config: config, logger: logger, upstreamTLS: upstreamTLS, leafIssuer: leafIssuer,
                                   queue: queue, admin: admin, metrics: metrics, adminListenAddress: adminAddress,
                                   mainListenAddress: sockets[0].address, listeners: sockets.map(\.bound),
                                   faults: faults, events: events, credentials: credentials)
        for index in 0..<loopCount {
            let loop: EventLoop
            do {
                loop = try EventLoop(index: index, sweepInterval: context.sweepInterval)
            } catch {
                closeAll()
                throw .system(error)
            }
            loops.append(loop)
            states.append(LoopBound(value: ProxyLoop(loop: loop, context: context, server: self), loop: loop))
        }
        // Held while descriptors last; let go when they run out, so the process keeps some.
        DescriptorReserve.process.fill()
        let first = loops[0]
        let gate = AcceptGate(loop: first, logger: logger)
        listeners = sockets.map { socket in
            LoopBound(value: Listener(fd: socket.fd, role: socket.role, server: self, gate: gate), loop: first)
        }
        first.execute { [self] in
            for listener in self.listeners { listener.value.register(on: first) }
        }
        for loop in loops { loop.start() }
        return (sockets[0].address, adminAddress)
    }

    /// Hands an accepted socket to the next loop (called on loop 0).
    func dispatch(fd: Int32, peer: SocketAddress, role: ListenerRole, sequence: Int) -> Bool {
        let limit = config.limits.maxConnections
        if adjustOpenConnections(of: role, by: 1) > limit {
            _ = adjustOpenConnections(of: role, by: -1)
            return false
        }
        let state = states[sequence % states.count]
        if state.loop === loops[0] {
            state.value.adopt(fd: fd, peer: peer, role: role)
        } else {
            state.loop.execute { state.value.adopt(fd: fd, peer: peer, role: role) }
        }
        return true
    }

    func connectionClosed(role: ListenerRole) {
        _ = adjustOpenConnections(of: role, by: -1)
    }

    /// The listener's count of open connections after adding `delta`.
    private func adjustOpenConnections(of role: ListenerRole, by delta: Int) -> Int {
        switch role {
        case .main: openConnections.wrappingAdd(delta, ordering: .relaxed).newValue
        case .admin: openAdminConnections.wrappingAdd(delta, ordering: .relaxed).newValue
        }
    }

    func loopDrained() {
        if drainedLoops.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue == states.count {
            drained.signal()
        }
    }

    /// Stops accepting, waits up to `timeout` seconds for in-flight exchanges, then closes
    /// every connection and stops the loops. Blocks the calling thread (not a loop thread).
    /// Returns false when the grace period ran out with exchanges still open.
    /// `beforeStoppingLoops` runs once the clients are done, while the loops still run: work
    /// that needs them to end (replay attempts in flight) waits there.
    @discardableResult
    public func shutdown(timeout: Double, beforeStoppingLoops: () -> Void = {}) -> Bool {
        guard let first = loops.first else { return true }
        let logger = self.logger
        first.execute { [self] in
            for listener in self.listeners { listener.value.stop() }
            logger.info("accepting_stopped")
        }
        for state in states { state.loop.execute { state.value.beginDrain() } }
        let clean = drained.wait(timeout: .now() + timeout) == .success
        if !clean {
            let done = DispatchSemaphore(value: 0)
            let remaining = Atomic<Int>(states.count)
            for state in states {
                state.loop.execute {
                    state.value.closeAll()
                    if remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done.signal() }
                }
            }
            _ = done.wait(timeout: .now() + 2)
        }
        beforeStoppingLoops()
        for loop in loops { loop.stop() }
        for loop in loops { loop.join() }
        return clean
    }
}

/// A listening socket, served by loop 0: accepts in a burst and spreads connections over
/// the loops round-robin, so a few long-lived keep-alive connections load every core. Each
/// connection remembers the listener's role, which decides what it may reach. Out of
/// descriptors, it stops accepting for a moment, as its ``AcceptGate`` says.
final class Listener: EventHandler {
    let fd: Int32
    let role: ListenerRole
    private unowned let server: ProxyServer
    private let gate: AcceptGate
    private var loop: EventLoop?
    private var sequence = 0
    /// Out of the epoll set for the gate's pause.
    private var paused = false

    init(fd: Int32, role: ListenerRole, server: ProxyServer, gate: AcceptGate) {
        self.fd = fd
        self.role = role
        self.server = server
        self.gate = gate
    }

    func register(on loop: EventLoop) {
        self.loop = loop
        gate.add(self)
        loop.register(fd: fd, handler: self, events: EPOLLIN.rawValue)
    }

    func handleEvents(_ events: UInt32) {
        for _ in 0..<64 {
            let client: Int32
            let peer: SocketAddress
            switch Sockets.accept(fd) {
            case .connection(let accepted, let address): (client, peer) = (accepted, address)
            case .nothingPending: return
            case .lost: continue
            case .resourcesExhausted(let error):
                // The connection stays queued and the socket readable: accepting again now
                // would spin (level-triggered). The gate pauses every listener instead.
                gate.exhausted(error, on: role)
                return
            }
            gate.accepted()
            sequence &+= 1
            if !server.dispatch(fd: client, peer: peer, role: role, sequence: sequence) {
                // Over limits.maxConnections: a clear answer beats a silent reset.
                let bytes = ErrorResponse.bytes(for: .tooManyConnections, close: true, retryAfterSeconds: 1)
                _ = bytes.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                Glibc.close(client)
            }
        }
    }

    /// Stops reading the socket (the gate's pause); connections wait in the backlog meanwhile.
    func pause() {
        guard let loop, !paused else { return }
        paused = true
        loop.unregister(fd: fd)
    }

    /// Reads the socket again after a pause; nothing once stopped.
    func resume() {
        guard let loop, paused else { return }
        paused = false
        loop.register(fd: fd, handler: self, events: EPOLLIN.rawValue)
    }

    func stop() {
        guard let loop else { return }
        if !paused { loop.unregister(fd: fd) }
        Glibc.close(fd)
        self.loop = nil
    }
}

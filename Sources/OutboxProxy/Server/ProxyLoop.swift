import OutboxNet
import OutboxTelemetry

/// Everything one event loop owns: its client connections, its upstream pool, its share of
/// the shutdown. Touched only on that loop's thread.
final class ProxyLoop {
    let loop: EventLoop
    let context: ProxyContext
    let pool: UpstreamPool
    /// The pool behind the fault rules: direct forwards and replay attempts each have one, so
    /// a rule can apply to either.
    let directTransport: UpstreamTransport
    let replayTransport: UpstreamTransport
    /// This loop's request counters for `/admin/metrics`.
    let metrics: Metrics.Shard
    private unowned let server: ProxyServer
    private var connections: [ObjectIdentifier: ClientConnection] = [:]
    private(set) var draining = false
    private var reportedDrained = false

    init(loop: EventLoop, context: ProxyContext, server: ProxyServer) {
        self.loop = loop
        self.context = context
        self.server = server
        pool = UpstreamPool(loop: loop, timeouts: context.upstreamTimeouts,
                            maxHeaderBytes: context.parserLimits.maxHeaderBytes, tlsContext: context.upstreamTLS)
        metrics = context.metrics.makeShard()
        directTransport = FaultInjectingTransport(base: pool, kind: .direct, faults: context.faults, loop: loop,
                                                  responseTimeout: context.upstreamTimeouts.response)
        replayTransport = FaultInjectingTransport(base: pool, kind: .replay, faults: context.faults, loop: loop,
                                                  responseTimeout: context.upstreamTimeouts.response)
    }

    /// Takes ownership of a socket accepted by the listener with `role`.
    func adopt(fd: Int32, peer: SocketAddress, role: ListenerRole) {
        let connection = ClientConnection(fd: fd, peer: peer, listener: role, proxyLoop: self)
        connections[ObjectIdentifier(connection)] = connection
        if draining { connection.drain() }
    }

    func connectionClosed(_ connection: ClientConnection) {
        guard connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        server.connectionClosed()
        if draining { reportIfDrained() }
    }

    /// Shutdown: idle connections close at once, busy ones after their current exchange.
    func beginDrain() {
        draining = true
        for connection in Array(connections.values) { connection.drain() }
        reportIfDrained()
    }

    /// End of the grace period: whatever is still open is cut.
    func closeAll() {
        for connection in Array(connections.values) { connection.close() }
        pool.closeIdle()
    }

    private func reportIfDrained() {
        guard connections.isEmpty, !reportedDrained else { return }
        reportedDrained = true
        pool.closeIdle()
        server.loopDrained()
    }
}

extension ProxyLoop: UpstreamLoop {}

import OutboxHTTP
import OutboxModel
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
    /// Operation ids and generated idempotency keys, without a system call per request.
    let uuids = RandomUUIDs()
    private unowned let server: ProxyServer
    private var connections: [ObjectIdentifier: ClientConnection] = [:]
    /// Emptied header lists of finished heads, reused for the next heads this loop rewrites
    /// (upstream requests, client responses): steady traffic then builds them without malloc.
    private var spareHeaders: [HTTPHeaders] = []
    private static let maxSpareHeaders = 64
    /// A list grown by an unusually large head is let go rather than kept per loop.
    private static let maxSpareHeaderBytes = 8 * 1024
    /// Emptied request-body buffers, reused like `spareHeaders`; at most 64 × 16 KiB per loop.
    private var spareBodies: [[UInt8]] = []
    private static let maxSpareBodies = 64
    private static let maxSpareBodyBytes = 16 * 1024
    /// This loop's share of `limits.bodyMemoryBytes` (see `BodyMemoryBudget.Lease`).
    let bodyMemory: BodyMemoryBudget.Lease
    /// Where spilled request bodies are read into on their way upstream or into a hash.
    var spillScratch: [UInt8] = []
    private(set) var draining = false
    private var reportedDrained = false

    init(loop: EventLoop, context: ProxyContext, server: ProxyServer) {
        self.loop = loop
        self.context = context
        self.server = server
        pool = UpstreamPool(loop: loop, timeouts: context.upstreamTimeouts,
                            maxHeaderBytes: context.parserLimits.maxHeaderBytes, tlsContext: context.upstreamTLS,
                            targetPolicy: context.targetPolicy)
        metrics = context.metrics.makeShard()
        bodyMemory = BodyMemoryBudget.Lease(context.bodyMemory)
        directTransport = FaultInjectingTransport(base: pool, kind: .direct, faults: context.faults, loop: loop,
                                                  responseTimeout: context.upstreamTimeouts.response)
        replayTransport = FaultInjectingTransport(base: pool, kind: .replay, faults: context.faults, loop: loop,
                                                  responseTimeout: context.upstreamTimeouts.response)
    }

    /// An empty header list, with room from an earlier head when one is spare.
    func takeHeaders() -> HTTPHeaders {
        spareHeaders.popLast() ?? HTTPHeaders()
    }

    /// Takes `headers` for reuse, leaving an empty list in its place.
    func recycle(_ headers: inout HTTPHeaders) {
        var spent = HTTPHeaders()
        swap(&spent, &headers)
        guard spareHeaders.count < Self.maxSpareHeaders, spent.byteCapacity <= Self.maxSpareHeaderBytes else { return }
        spent.removeAll(keepingCapacity: true)
        spareHeaders.append(spent)
    }

    /// An empty byte buffer for a request body, with room from an earlier body when one is
    /// spare: a forwarded POST then keeps its body (needed to store or resend it) without malloc.
    func takeBodyBuffer() -> [UInt8] {
        spareBodies.popLast() ?? []
    }

    /// Takes `body` for reuse, leaving an empty buffer in its place.
    func recycle(body: inout [UInt8]) {
        var spent: [UInt8] = []
        swap(&spent, &body)
        guard spareBodies.count < Self.maxSpareBodies, spent.capacity > 0, spent.capacity <= Self.maxSpareBodyBytes
        else { return }
        spent.removeAll(keepingCapacity: true)
        spareBodies.append(spent)
    }

    /// Takes ownership of a socket accepted by the listener with `role`.
    func adopt(fd: Int32, peer: SocketAddress, role: ListenerRole) {
        let connection = ClientConnection(fd: fd, peer: peer, listener: role, proxyLoop: self)
        connections[ObjectIdentifier(connection)] = connection
        if draining { connection.drain() }
    }

    func connectionClosed(_ connection: ClientConnection) {
        guard connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        server.connectionClosed(role: connection.listener)
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

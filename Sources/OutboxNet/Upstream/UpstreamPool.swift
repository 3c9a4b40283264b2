import Dispatch
import Glibc
import OutboxHTTP
import OutboxModel

/// The upstream transport of one event loop, for `http://` and `https://` alike: keep-alive
/// connections per origin, reused LIFO so the warmest connection serves next, a small DNS
/// cache, and the last TLS session of each https origin, so a new connection resumes it.
///
/// Each loop has its own pool, so a connection never changes threads and nothing here locks.
/// Name lookups (blocking `getaddrinfo`) run off the loop and hop back; of a name's several
/// addresses, the first that accepts a connection is the one connections go to.
///
/// No connection is made to an address ``UpstreamTargetPolicy`` refuses (Outbox's own
/// listeners; internal addresses for wildcard-only hosts): the verdict is taken once per
/// resolution, before any address is tried, and kept with the addresses, so that the
/// forwarding path pays one cached lookup per new connection and nothing per reused one.
package final class UpstreamPool: UpstreamTransport {
    unowned(unsafe) let loop: EventLoop  // the pool belongs to its loop
    let timeouts: UpstreamTimeouts
    let maxHeaderBytes: Int
    let maxIdlePerOrigin: Int
    /// Verification, trust and client certificate for `https://` origins; nil: none can be reached.
    let tlsContext: TLSContext?
    private var sessions: [Origin: TLSSession] = [:]
    /// Boxed per origin, so taking and returning a connection mutates the box found by a plain
    /// lookup: a dictionary's in-place `modify` allocates its coroutine frames, three mallocs on
    /// every request.
    private var idle: [Origin: IdleConnections] = [:]
    private var resolved: [String: (addresses: [SocketAddress], expires: UInt64, verdict: UpstreamTargetPolicy.Verdict)] = [:]
    private static let dnsLifetime: UInt64 = 30_000_000_000
    /// What connections may reach, and the verdicts for numeric hosts (decided on the loop,
    /// kept as long as a name's, since the interface addresses a wildcard listener covers
    /// may change), with the interface addresses they were decided against.
    let targetPolicy: UpstreamTargetPolicy
    private var numericVerdicts: [String: (verdict: UpstreamTargetPolicy.Verdict, expires: UInt64)] = [:]
    private var localAddresses: (addresses: [IPAddress], expires: UInt64)?
    /// A forward proxy may meet any number of numeric hosts; a verdict is only a saving.
    private static let maxNumericVerdicts = 4_096
    /// The connection that found an origin's first reachable address, kept for the origin's
    /// next connection (a call's or a tunnel's) rather than closed: the origin then sees one
    /// connection, not an empty one before it, and the call saves a handshake. Dropped when
    /// unused for `probedLifetime`.
    private var probed: [Origin: (fd: Int32, expires: UInt64)] = [:]
    private static let probedLifetime: UInt64 = 1_000_000_000
    /// The name lookup (blocking, run off the loop); tests put addresses of their own here.
    private let resolve: @Sendable (_ host: String, _ port: Int) -> [SocketAddress]

    package init(loop: EventLoop, timeouts: UpstreamTimeouts, maxHeaderBytes: Int, tlsContext: TLSContext?,
                 maxIdlePerOrigin: Int = 256, targetPolicy: UpstreamTargetPolicy = UpstreamTargetPolicy(),
                 resolve: @escaping @Sendable (_ host: String, _ port: Int) -> [SocketAddress] = SocketAddress.resolve) {
        self.loop = loop
        self.targetPolicy = targetPolicy
        self.tlsContext = tlsContext
        self.timeouts = timeouts
        self.maxHeaderBytes = maxHeaderBytes
        self.maxIdlePerOrigin = maxIdlePerOrigin
        self.resolve = resolve
    }

    /// True when a call to `origin` can start now: a pooled connection or a known address.
    package func isReady(_ origin: Origin) -> Bool {
        idle[origin]?.connections.isEmpty == false || addresses(of: origin) != nil
    }

    /// Makes sure `origin`'s address is known, then calls `ready` on the loop (at once when
    /// the host is numeric or cached).
    package func prepare(_ origin: Origin, ready: @escaping (Result<Void, UpstreamError>) -> Void) {
        if isReady(origin) {
            ready(.success(()))
            return
        }
        let connectTimeout = timeouts.connect
        let resolve = resolve
        let policy = targetPolicy
        let pool = LoopBound(value: self, loop: loop)
        let callback = LoopBound(value: ready, loop: loop)
        DispatchQueue.global().async {
            let addresses = resolve(origin.host, origin.port)
            let local = policy.needsLocalAddresses && !addresses.isEmpty ? IPAddress.localInterfaceAddresses() : []
            // Decided before any address is tried: a refused target gets no connection at all.
            let verdict = policy.verdict(host: origin.host, addresses: addresses, localAddresses: local)
            // Connections (and tunnels) go to the first address: make it one that answers.
            let found = verdict.refusal(port: origin.port) == nil
                ? Sockets.reachableFirst(addresses, timeout: connectTimeout) : Sockets.Reached(addresses: addresses)
            pool.loop.execute {
                pool.value.finishResolving(origin, found: found, verdict: verdict, ready: callback.value)
            }
        }
    }

    private func finishResolving(_ origin: Origin, found: Sockets.Reached, verdict: UpstreamTargetPolicy.Verdict,
                                 ready: (Result<Void, UpstreamError>) -> Void) {
        dropExpiredProbes()
        if let fd = found.connected {
            // Two calls that prepared the same origin at once: the later connection serves.
            if let older = probed.updateValue((fd, loop.now + Self.probedLifetime), forKey: origin) { close(older.fd) }
        }
        if found.addresses.isEmpty {
            ready(.failure(.connectFailed("cannot resolve host \(origin.host)")))
            return
        }
        resolved[origin.host] = (found.addresses, loop.now + UpstreamPool.dnsLifetime, verdict)
        if let refusal = verdict.refusal(port: origin.port) {
            ready(.failure(refusal))
            return
        }
        ready(.success(()))
    }

    /// The connection that found `origin`'s address (see `probed`), if it was made moments ago
    /// and its peer has not ended it: connected to the first of `addresses(of:)`.
    package func takeProbedConnection(to origin: Origin) -> Int32? {
        guard let entry = probed.removeValue(forKey: origin) else { return nil }
        if entry.expires > loop.now && Sockets.isStillOpen(entry.fd) { return entry.fd }
        close(entry.fd)
        return nil
    }

    private func dropExpiredProbes() {
        guard !probed.isEmpty else { return }
        let now = loop.now
        for (origin, entry) in probed where entry.expires <= now {
            close(entry.fd)
            probed[origin] = nil
        }
    }

    package func addresses(of origin: Origin) -> [SocketAddress]? {
        if let numeric = SocketAddress.resolveNumeric(origin.host, port: origin.port) { return [numeric] }
        guard let entry = resolved[origin.host], entry.expires > loop.now else { return nil }
        return entry.addresses.map { address in
            // The cache holds addresses for the first port asked; rebuild with this port.
            SocketAddress.resolveNumeric(address.hostText, port: origin.port) ?? address
        }
    }

    /// Why `host` (lowercased, as `Origin` keeps it) at `port` may not be reached, when that is
    /// known without a lookup (a numeric host, or a name resolved moments ago); nil when it
    /// may be, or when only resolving will tell. For answering a request before anything is
    /// stored or tunnelled.
    package func knownRefusal(host: String, port: Int) -> UpstreamError? {
        guard !targetPolicy.refusesNothing else { return nil }
        if SocketAddress.resolveNumeric(host, port: port) != nil {
            return numericVerdict(of: host).refusal(port: port)
        }
        guard let entry = resolved[host], entry.expires > loop.now else { return nil }
        return entry.verdict.refusal(port: port)
    }

    /// The address a new connection to `origin` goes to: the first of `addresses(of:)`, once
    /// the target policy allows it.
    private func destination(of origin: Origin) -> Result<SocketAddress, UpstreamError> {
        if let numeric = SocketAddress.resolveNumeric(origin.host, port: origin.port) {
            if !targetPolicy.refusesNothing, let refusal = numericVerdict(of: origin.host).refusal(port: origin.port) {
                return .failure(refusal)
            }
            return .success(numeric)
        }
        guard let entry = resolved[origin.host], entry.expires > loop.now, let first = entry.addresses.first else {
            return .failure(.connectFailed("cannot resolve host \(origin.host)"))
        }
        if let refusal = entry.verdict.refusal(port: origin.port) { return .failure(refusal) }
        // The cache holds addresses for the first port asked; rebuild with this port.
        return .success(SocketAddress.resolveNumeric(first.hostText, port: origin.port) ?? first)
    }

    /// The verdict for a numeric host, decided on the loop (no lookup needed) and kept for a
    /// name's lifetime. Only a wildcard listener makes it ask the kernel for the interface
    /// addresses, at most once per lifetime for every host.
    private func numericVerdict(of host: String) -> UpstreamTargetPolicy.Verdict {
        let now = loop.now
        if let entry = numericVerdicts[host], entry.expires > now { return entry.verdict }
        guard let address = SocketAddress.resolveNumeric(host, port: 0) else { return .allowed }
        var local: [IPAddress] = []
        if targetPolicy.needsLocalAddresses {
            if let cached = localAddresses, cached.expires > now {
                local = cached.addresses
            } else {
                local = IPAddress.localInterfaceAddresses()
                localAddresses = (local, now + Self.dnsLifetime)
            }
        }
        let verdict = targetPolicy.verdict(host: host, addresses: [address], localAddresses: local)
        if numericVerdicts.count >= Self.maxNumericVerdicts { numericVerdicts.removeAll() }
        numericVerdicts[host] = (verdict, now + Self.dnsLifetime)
        return verdict
    }

    /// A connecting socket to `origin` for a tunnel: the connection that found its address
    /// when there is one, else a new one; refused as any connection is.
    package func connectSocket(to origin: Origin) -> Result<Int32, UpstreamError> {
        switch destination(of: origin) {
        case .failure(let error): .failure(error)
        case .success(let address): connectSocket(to: origin, at: address)
        }
    }

    private func connectSocket(to origin: Origin, at address: SocketAddress) -> Result<Int32, UpstreamError> {
        if let fd = takeProbedConnection(to: origin) { return .success(fd) }
        switch Sockets.connect(to: address) {
        case .success(let fd): return .success(fd)
        case .failure(let error): return .failure(.connecting(error))
        }
    }

    package func startCall(to origin: Origin, head: HTTPRequestHead, bodyFraming: HTTPBodyFraming,
                   handler: UpstreamResponseHandler) -> UpstreamCall {
        if let connection = takeIdle(origin) {
            connection.begin(head: head, bodyFraming: bodyFraming, handler: handler)
            return connection
        }
        switch connect(origin) {
        case .success(let connection):
            connection.begin(head: head, bodyFraming: bodyFraming, handler: handler)
            return connection
        case .failure(let error):
            let failed = FailedCall(handler: handler, error: error)
            // Report after the caller has stored the call, as a real connection would.
            let bound = LoopBound(value: failed, loop: loop)
            loop.execute { bound.value.deliver() }
            return failed
        }
    }

    private func takeIdle(_ origin: Origin) -> UpstreamConnection? {
        guard let entry = idle[origin] else { return nil }
        while let connection = entry.connections.popLast() {
            if connection.state == .idle && !connection.stream.reachedEnd { return connection }
            connection.close()
        }
        return nil
    }

    private func connect(_ origin: Origin) -> Result<UpstreamConnection, UpstreamError> {
        let address: SocketAddress
        switch destination(of: origin) {
        case .failure(let error): return .failure(error)
        case .success(let found): address = found
        }
        var tls: TLSEngine?
        if origin.scheme == .https {
            guard let tlsContext else { return .failure(.tlsFailed("no TLS settings")) }
            do {
                let engine = try TLSEngine(clientOf: tlsContext, host: origin.host)
                if let session = sessions[origin] { engine.resume(session) }
                tls = engine
            } catch {
                return .failure(.tlsFailed(error.reason))
            }
        }
        return connectSocket(to: origin, at: address).map { fd in
            UpstreamConnection(origin: origin, fd: fd, pool: self, tls: tls)
        }
    }

    func remember(_ session: TLSSession, for origin: Origin) {
        // A forward proxy may meet any number of origins; a session is only a saving.
        if sessions.count >= 1_024 && sessions[origin] == nil { sessions.removeAll() }
        sessions[origin] = session
    }

    func forgetSession(for origin: Origin) {
        sessions[origin] = nil
    }

    /// Takes back a connection whose exchange ended cleanly.
    func release(_ connection: UpstreamConnection) {
        let entry: IdleConnections
        if let known = idle[connection.origin] {
            entry = known
        } else {
            entry = IdleConnections()
            idle[connection.origin] = entry
        }
        if entry.connections.count >= maxIdlePerOrigin {
            connection.close()
            return
        }
        entry.connections.append(connection)
    }

    /// Drops a closing connection from the idle list.
    func forget(_ connection: UpstreamConnection) {
        guard let entry = idle[connection.origin],
              let index = entry.connections.lastIndex(where: { $0 === connection }) else { return }
        entry.connections.remove(at: index)
    }

    /// Closes every idle connection (shutdown).
    package func closeIdle() {
        for entry in probed.values { close(entry.fd) }
        probed.removeAll()
        let all = idle.values.flatMap { $0.connections }
        idle.removeAll()
        for connection in all { connection.close() }
    }
}

/// One origin's idle connections, most recently used last.
private final class IdleConnections {
    var connections: [UpstreamConnection] = []
}

/// The call returned when connecting failed at once; its handler hears the failure next turn.
private final class FailedCall: UpstreamCall {
    private var handler: UpstreamResponseHandler?
    private let error: UpstreamError

    init(handler: UpstreamResponseHandler, error: UpstreamError) {
        self.handler = handler
        self.error = error
    }

    func deliver() {
        let handler = self.handler
        self.handler = nil
        handler?.upstreamFailed(error)
    }

    var canAcceptBody: Bool { true }
    func sendBody(_ bytes: UnsafeRawBufferPointer) {}
    func finishBody(trailers: HTTPHeaders) {}
    func pauseResponse() {}
    func resumeResponse() {}
    func cancel() { handler = nil }
}

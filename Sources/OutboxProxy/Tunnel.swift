import Glibc
import OutboxFaults
import OutboxHTTP
import OutboxModel
import OutboxNet

/// A `CONNECT` tunnel: after `200`, bytes flow both ways unchanged until both sides are done.
///
/// Each direction has backpressure (the reader pauses while the other side's queue is above
/// the high-water mark) and half-close (EOF on one side becomes `shutdown(SHUT_WR)` on the
/// other once queued bytes are out).
///
/// The fault rules apply to the tunnel as a whole, as a request to `https://host:port` with
/// method `CONNECT` and target `host:port` (so a rule naming a method or a path prefix never
/// matches one): the bytes inside are opaque, so a rule acts on the `CONNECT` itself, and the
/// target receives nothing from a tunnel a rule answers. `offline` answers `503` as a refused
/// connect does, `timeout` answers `504` after `reachability.responseTimeoutSeconds`, `status`
/// answers the `CONNECT` with the rule's status, `reset` answers `200` and closes (the
/// client's handshake finds the connection gone), `latency` connects after the delay.
final class Tunnel: SocketStreamDelegate, ConnectionRelay, DeadlineTracked {
    unowned let client: ClientConnection
    private var target: SocketStream?
    private var connected = false
    private var clientDone = false
    private var targetDone = false
    private var closed = false
    private let host: String
    private let port: Int
    /// Set while a `timeout` or `latency` rule holds the tunnel: what to do at the deadline.
    private var held: (deadline: UInt64, action: FaultRule.Action)?

    init(client: ClientConnection, host: String, port: Int) {
        self.client = client
        self.host = host
        self.port = port
        client.stream.pauseReading()
        let faultOrigin = Origin(scheme: .https, host: host, port: port)
        guard let action = client.context.faults.decide(origin: faultOrigin, method: "CONNECT", target: "\(host):\(port)",
                                                        kind: .direct) else {
            prepare()
            return
        }
        switch action {
        case .timeout:
            hold(action, seconds: client.context.upstreamTimeouts.response)
        case .latency(let seconds):
            hold(action, seconds: seconds)
        case .offline, .status, .reset:
            // On a later turn: the connection stores this tunnel as its relay once `init` returns.
            let bound = LoopBound(value: self, loop: client.loop)
            client.loop.execute { bound.value.answer(action) }
        }
    }

    private func prepare() {
        let origin = Origin(scheme: .http, host: host, port: port)
        client.proxyLoop.pool.prepare(origin) { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .success: self.connect(origin)
            case .failure(let error): self.client.tunnelFailed(.upstream(error))
            }
        }
    }

    private func hold(_ action: FaultRule.Action, seconds: Double) {
        held = (client.loop.now + UInt64(max(0, seconds) * 1e9), action)
        client.loop.track(self)
    }

    func checkDeadlines(now: UInt64) {
        guard let held, now >= held.deadline else { return }
        self.held = nil
        client.loop.untrack(self)
        guard !closed else { return }
        if case .latency = held.action { prepare() } else { client.tunnelFailed(.upstream(.responseTimeout)) }
    }

    /// A rule's answer in the target's place; nothing is connected.
    private func answer(_ action: FaultRule.Action) {
        guard !closed else { return }
        switch action {
        case .offline:
            client.tunnelFailed(.upstream(.connectFailed("connection refused (fault)")))
        case .status(let status, let retryAfter, let body):
            var head = FaultAnswer.head(status: status, retryAfterSeconds: retryAfter, body: body)
            head.headers.add("Connection", "close")
            var bytes: [UInt8] = []
            HTTPSerializer.writeResponseHead(head, into: &bytes)
            bytes += body
            finishAnswering(bytes)
        case .reset:
            finishAnswering(Self.established)
        case .timeout, .latency:
            break
        }
    }

    /// Sends `bytes` to the client, then closes its connection (the tunnel never opened).
    private func finishAnswering(_ bytes: [UInt8]) {
        closed = true
        client.stream.enqueue(bytes)
        client.tunnelClosed()
    }

    private static let established = Array("HTTP/1.1 200 Connection Established\r\n\r\n".utf8)

    /// Through the pool, which refuses Outbox's own listeners and, for wildcard-only hosts,
    /// internal addresses, as it does for every other connection.
    private func connect(_ origin: Origin) {
        switch client.proxyLoop.pool.connectSocket(to: origin) {
        case .failure(let error):
            client.tunnelFailed(.upstream(error))
        case .success(let fd):
            start(SocketStream(fd: fd, loop: client.loop, connecting: true))
        }
    }

    private func start(_ stream: SocketStream) {
        stream.delegate = self
        target = stream
    }

    // MARK: Client side

    func clientReadable() {
        guard connected, let target else { return }
        let source = client.stream
        let buffer = source.input
        if source.inputIndex < buffer.count {
            buffer.withUnsafeBytes { target.enqueue(UnsafeRawBufferPointer(rebasing: $0[source.inputIndex...])) }
            source.inputIndex = buffer.count
            source.compactInput()
            target.flushSoon()
        }
        if !target.isWritable { source.pauseReading() }
    }

    func clientEnded() {
        clientDone = true
        target?.shutdownWrite()
        if targetDone { finish() }
    }

    func clientDrained() {
        target?.resumeReading()
    }

    // MARK: Target side

    func streamDidDrain(_ stream: SocketStream) {
        if !connected {
            connected = true
            client.stream.enqueue(Self.established)
            client.stream.flushSoon()
            client.stream.resumeReading()
            // Bytes that came with the CONNECT head (TLS ClientHello) go out now.
            clientReadable()
            return
        }
        client.stream.resumeReading()
    }

    func streamDidRead(_ stream: SocketStream) {
        let buffer = stream.input
        if stream.inputIndex < buffer.count {
            buffer.withUnsafeBytes { client.stream.enqueue(UnsafeRawBufferPointer(rebasing: $0[stream.inputIndex...])) }
            stream.inputIndex = buffer.count
            stream.compactInput()
            client.stream.flushSoon()
        }
        if !client.stream.isWritable { stream.pauseReading() }
    }

    func streamDidReachEnd(_ stream: SocketStream, error: Int32?) {
        if !connected {
            let reason = String(cString: strerror(error ?? ECONNREFUSED))
            closed = true
            stream.close()
            target = nil
            client.tunnelFailed(.upstream(.connectFailed(reason)))
            return
        }
        targetDone = true
        client.stream.shutdownWrite()
        if clientDone { finish() }
    }

    func streamDidFailWrite(_ stream: SocketStream, error: Int32) {
        finish()
    }

    private func finish() {
        guard !closed else { return }
        closed = true
        target?.closeAfterFlush()
        target = nil
        client.tunnelClosed()
    }

    func close() {
        closed = true
        if held != nil {
            held = nil
            client.loop.untrack(self)
        }
        target?.close()
        target = nil
    }
}

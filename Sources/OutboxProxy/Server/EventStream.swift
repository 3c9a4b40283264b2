import OutboxNet
import OutboxTelemetry

/// `GET /admin/events` on one connection: server-sent events from the hub, a comment line
/// every 15 s so that idle proxies and clients keep the connection, and nothing else.
///
/// Events are taken from the subscription only while the socket keeps up; meanwhile they wait
/// in the subscription's bounded backlog. A client that stops reading lets that backlog
/// overflow and is dropped: it costs the publishers one append and no more.
final class EventStream: ConnectionRelay, DeadlineTracked {
    private unowned let client: ClientConnection
    private var subscription: EventSubscription?
    private var nextHeartbeat: UInt64
    static let heartbeatNanos: UInt64 = 15_000_000_000

    private static let head = Array(("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
        + "Connection: close\r\n\r\n").utf8)
    private static let heartbeat = Array(": heartbeat\n\n".utf8)

    /// What the socket may hold before events wait in the subscription's backlog instead.
    static let socketShare = 64 * 1024

    init(client: ClientConnection, hub: EventHub, lastEventID: String?) {
        self.client = client
        // A listener that stops reading is to be noticed by its backlog's bound, not hidden
        // in kernel buffers.
        client.stream.limitKernelSendBuffer(Int32(Self.socketShare))
        nextHeartbeat = client.loop.now + Self.heartbeatNanos
        client.stream.enqueue(Self.head)
        // An opening comment: the client sees the stream is live before the first event.
        client.stream.enqueue(Array(": outbox events\n\n".utf8))
        let wake = WeakWake(self, loop: client.loop)
        subscription = hub.subscribe(lastEventID: lastEventID) { wake.fire() }
        client.loop.track(self)
        pump()
        client.stream.flushSoon()
    }

    /// Moves what the subscription holds to the socket, unless the socket is behind.
    func pump() {
        guard let subscription else { return }
        if subscription.hasOverflowed {
            client.logger.info("events_client_dropped", ["client": client.peerText, "reason": "not reading"])
            return finish()
        }
        guard client.stream.queuedOutputBytes < Self.socketShare else { return }
        let (bytes, overflowed) = subscription.take()
        if overflowed { return pump() }
        if !bytes.isEmpty {
            client.stream.enqueue(bytes)
            client.stream.flushSoon()
        }
    }

    /// Ends the stream: what is queued goes out, then the connection closes.
    func finish() {
        guard subscription != nil else { return }
        close()
        client.tunnelClosed()
    }

    func clientReadable() {
        // The client has nothing to say on this connection: its bytes are dropped.
        let stream = client.stream
        stream.inputIndex = stream.input.count
        stream.compactInput()
    }

    func clientDrained() { pump() }

    func clientEnded() { finish() }

    func close() {
        subscription?.cancel()
        subscription = nil
        client.loop.untrack(self)
    }

    func checkDeadlines(now: UInt64) {
        guard subscription != nil, now >= nextHeartbeat else { return }
        nextHeartbeat = now + Self.heartbeatNanos
        if client.stream.queuedOutputBytes < Self.socketShare {
            client.stream.enqueue(Self.heartbeat)
            client.stream.flushSoon()
        }
    }
}

/// The subscription's wake-up: hops to the stream's loop and pumps, unless the stream is gone
/// (the hub must not keep a closed connection alive).
private final class WeakWake: @unchecked Sendable {
    // Read on the loop thread only (inside `execute`).
    private weak var stream: EventStream?
    private let loop: EventLoop

    init(_ stream: EventStream, loop: EventLoop) {
        self.stream = stream
        self.loop = loop
    }

    func fire() {
        loop.execute { [self] in stream?.pump() }
    }
}

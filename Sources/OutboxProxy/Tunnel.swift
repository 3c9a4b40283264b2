import Glibc
import OutboxModel
import OutboxNet

/// A `CONNECT` tunnel: after `200`, bytes flow both ways unchanged until both sides are done.
///
/// Each direction has backpressure (the reader pauses while the other side's queue is above
/// the high-water mark) and half-close (EOF on one side becomes `shutdown(SHUT_WR)` on the
/// other once queued bytes are out).
final class Tunnel: SocketStreamDelegate, ConnectionRelay {
    unowned let client: ClientConnection
    private var target: SocketStream?
    private var connected = false
    private var clientDone = false
    private var targetDone = false
    private var closed = false
    private let host: String
    private let port: Int

    init(client: ClientConnection, host: String, port: Int) {
        self.client = client
        self.host = host
        self.port = port
        let origin = Origin(scheme: .http, host: host, port: port)
        client.stream.pauseReading()
        client.proxyLoop.pool.prepare(origin) { [weak self] result in
            guard let self, !self.closed else { return }
            switch result {
            case .success: self.connect(origin)
            case .failure(let error): self.client.tunnelFailed(.upstream(error))
            }
        }
    }

    private func connect(_ origin: Origin) {
        guard let address = client.proxyLoop.pool.addresses(of: origin)?.first else {
            client.tunnelFailed(.upstream(.connectFailed("cannot resolve \(host)")))
            return
        }
        switch Sockets.connect(to: address) {
        case .failure(let error):
            client.tunnelFailed(.upstream(.connectFailed(error.description)))
        case .success(let fd):
            let stream = SocketStream(fd: fd, loop: client.loop, connecting: true)
            stream.delegate = self
            target = stream
        }
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
            client.stream.enqueue(Array("HTTP/1.1 200 Connection Established\r\n\r\n".utf8))
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
        target?.close()
        target = nil
    }
}

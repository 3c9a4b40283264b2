import CSystem
import Glibc

/// What a ``SocketStream`` reports to its owner, always on the stream's loop thread.
package protocol SocketStreamDelegate: AnyObject {
    /// New bytes were appended to `stream.input`.
    func streamDidRead(_ stream: SocketStream)
    /// The peer will send no more bytes (EOF or a read error).
    func streamDidReachEnd(_ stream: SocketStream, error: Int32?)
    /// Queued output dropped below the low-water mark, or a non-blocking connect finished.
    func streamDidDrain(_ stream: SocketStream)
    /// A write failed (peer reset); the stream is about to be unusable.
    func streamDidFailWrite(_ stream: SocketStream, error: Int32)
    /// A TLS stream's TCP connect finished; its handshake starts now.
    func streamDidConnectTransport(_ stream: SocketStream)
    /// A TLS stream's handshake completed: plaintext flows from now on. (A plain stream that
    /// connects reports ``streamDidDrain(_:)`` instead.)
    func streamDidFinishHandshake(_ stream: SocketStream)
}

extension SocketStreamDelegate {
    package func streamDidConnectTransport(_ stream: SocketStream) {}
    package func streamDidFinishHandshake(_ stream: SocketStream) {}
}

/// A non-blocking TCP socket with an input buffer, an output queue and backpressure, driven by
/// its loop's readiness events (level-triggered epoll).
///
/// With a ``TLSEngine`` the socket carries TLS records and the owner still sees plaintext in
/// `input` and queues plaintext output: reads feed the engine and decrypt into `input`, a flush
/// encrypts the queued output into `wire`, the ciphertext the kernel has not taken yet.
///
/// Invariants: the fd is closed exactly once, in ``close()``; the epoll interest set mirrors
/// `readingPaused` and whether bytes can be sent; every callback runs on the loop thread.
package final class SocketStream: EventHandler, DeadlineTracked {
    let fd: Int32
    // The loop outlives every stream on it; unowned(unsafe) skips the side-table refcount
    // that `unowned`/`weak` cost on every access (measured: ~6 % of the proxy's CPU).
    package unowned(unsafe) let loop: EventLoop
    /// Strong: the owner and its stream form a cycle that ``close()`` breaks.
    package var delegate: SocketStreamDelegate?

    /// Received bytes not yet consumed; the owner parses `input[inputIndex...]`.
    package var input: [UInt8] = []
    package var inputIndex = 0
    private var output: [UInt8] = []
    private var outputIndex = 0
    private var interest: UInt32 = 0
    private(set) var isClosed = false
    package private(set) var readingPaused = false
    private(set) var reachedEnd = false
    private var connecting = false
    /// Loop time of the last byte read or written: how slow peers are told from busy ones.
    package private(set) var lastProgress: UInt64 = 0
    /// Close the socket once the output queue is empty.
    private var closeWhenFlushed = false
    /// Half-closed and discarding input until the peer closes too (or the deadline passes).
    private var lingering = false
    private var lingerDeadline: UInt64 = 0
    static let lingerNanos: UInt64 = 2_000_000_000

    /// TLS, when the socket carries it.
    package private(set) var tls: TLSEngine?
    /// Handshake records are exchanged; queued plaintext waits for the handshake to complete.
    package private(set) var handshaking = false
    /// Why TLS failed, when the end was reported because of it.
    package private(set) var tlsFailure: TLSError?
    /// Bytes ready for the socket and not sent yet: ciphertext, or a plain response written
    /// before TLS began (the `200` to a CONNECT).
    private var wire: [UInt8] = []
    private var wireIndex = 0

    package static let highWater = 256 * 1024
    package static let lowWater = 64 * 1024

    /// `tls`: a client engine for a connection being made (`connecting`); its handshake starts
    /// once TCP is connected. A server side begins TLS later, with ``startTLS(_:)``.
    package init(fd: Int32, loop: EventLoop, connecting: Bool = false, tls: TLSEngine? = nil) {
        self.fd = fd
        self.loop = loop
        self.connecting = connecting
        self.tls = tls
        interest = connecting ? EPOLLOUT.rawValue : EPOLLIN.rawValue | EPOLLRDHUP.rawValue
        lastProgress = loop.now
        loop.register(fd: fd, handler: self, events: interest)
    }

    package var queuedOutputBytes: Int { output.count - outputIndex + wire.count - wireIndex }
    package var unconsumedInputBytes: Int { input.count - inputIndex }
    package var isWritable: Bool { queuedOutputBytes < SocketStream.highWater }

    /// Caps the kernel's send buffer (`SO_SNDBUF`) for a long-lived stream whose reader may
    /// stall: on loopback its autotuning would otherwise hold megabytes per connection.
    package func limitKernelSendBuffer(_ bytes: Int32) {
        var size = bytes
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    // MARK: Events

    package func handleEvents(_ events: UInt32) {
        if connecting {
            guard events & (EPOLLOUT.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 else { return }
            connecting = false
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 {
                reachedEnd = true
                delegate?.streamDidReachEnd(self, error: error)
                return
            }
            if tls != nil {
                handshaking = true
                updateInterest()
                delegate?.streamDidConnectTransport(self)
                continueHandshake()
                return
            }
            updateInterest()
            delegate?.streamDidDrain(self)
            return
        }
        // Level-triggered epoll reports HUP/ERR even when not asked for: once reading is over,
        // they mean the connection is dead, and the owner must hear it or the loop would spin.
        if reachedEnd && events & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            delegate?.streamDidFailWrite(self, error: EPIPE)
            return
        }
        if events & EPOLLOUT.rawValue != 0 {
            flush()
            if isClosed { return }
        }
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue) != 0,
           !readingPaused, !reachedEnd {
            readOnce()
        }
    }

    private func readOnce() {
        let n = Glibc.read(fd, loop.scratch.baseAddress, loop.scratch.count)
        if lingering {
            // Input after our last response is dropped; EOF or an error ends the linger.
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { close() }
            return
        }
        if n > 0 {
            lastProgress = loop.now
            if let tls {
                tls.feed(UnsafeRawBufferPointer(rebasing: loop.scratch[0..<n]))
                if handshaking { continueHandshake() } else { decrypt(tls) }
                return
            }
            appendInput(UnsafeRawBufferPointer(rebasing: loop.scratch[0..<n]))
            delegate?.streamDidRead(self)
        } else if n == 0 {
            end(error: nil)
        } else {
            let code = errno
            if code == EAGAIN || code == EWOULDBLOCK || code == EINTR { return }
            end(error: code)
        }
    }

    private func appendInput(_ bytes: UnsafeRawBufferPointer) {
        if inputIndex == input.count {
            input.removeAll(keepingCapacity: true)
            inputIndex = 0
        } else if inputIndex > 0 && inputIndex >= input.count / 2 {
            input.removeSubrange(0..<inputIndex)
            inputIndex = 0
        }
        input.append(contentsOf: bytes)
    }

    /// The peer will send nothing more: EOF, a read error, close_notify or a TLS failure.
    private func end(error: Int32?) {
        reachedEnd = true
        updateInterest()
        delegate?.streamDidReachEnd(self, error: error)
    }

    // MARK: TLS

    /// Begins TLS as the server on an accepted connection, after the plaintext already queued
    /// (the `200` to a CONNECT) is sent. Bytes the client sent early are the start of its
    /// ClientHello: they go to the engine first.
    package func startTLS(_ engine: TLSEngine) {
        guard !isClosed, tls == nil else { return }
        wire.append(contentsOf: output[outputIndex...])
        output.removeAll(keepingCapacity: true)
        outputIndex = 0
        if unconsumedInputBytes > 0 {
            input.withUnsafeBytes { engine.feed(UnsafeRawBufferPointer(rebasing: $0[inputIndex...])) }
        }
        input.removeAll(keepingCapacity: true)
        inputIndex = 0
        tls = engine
        handshaking = true
        continueHandshake()
    }

    private func continueHandshake() {
        guard let tls, !isClosed else { return }
        switch tls.handshake() {
        case .complete:
            handshaking = false
            flush()
            if isClosed { return }
            delegate?.streamDidFinishHandshake(self)
            // Application data may have come with the handshake's last flight.
            if !isClosed { decrypt(tls) }
        case .wantRead, .wantWrite:
            flush()
        case .failed(let error):
            failTLS(error)
        }
    }

    /// Decrypts everything the engine holds into `input`, then tells the owner; a
    /// close_notify or a bad record ends the stream after the plaintext before it.
    private func decrypt(_ tls: TLSEngine) {
        var received = false
        var ended = false
        reading: while true {
            switch tls.read(into: loop.scratch) {
            case .bytes(let count):
                appendInput(UnsafeRawBufferPointer(rebasing: loop.scratch[0..<count]))
                received = true
            case .wantRead:
                break reading
            case .closed:
                ended = true
                break reading
            case .failed(let error):
                tlsFailure = error
                ended = true
                break reading
            }
        }
        // Reading may have produced records to send (a key update's answer).
        if tls.hasOutput { flushSoon() }
        if received { delegate?.streamDidRead(self) }
        guard ended, !isClosed, !reachedEnd else { return }
        end(error: nil)
    }

    private func failTLS(_ error: TLSError) {
        tlsFailure = error
        handshaking = false
        // The alert OpenSSL queued tells the peer why; one try, no waiting for it.
        if let tls { tls.drainOutput(appendingTo: &wire) }
        _ = sendQueued(&wire, from: &wireIndex)
        end(error: nil)
    }

    /// Encrypts the queued plaintext into `wire` (not while handshaking: it waits).
    private func encryptOutput(_ tls: TLSEngine) -> Bool {
        if !handshaking, outputIndex < output.count {
            let result = output.withUnsafeBytes { raw in tls.write(UnsafeRawBufferPointer(rebasing: raw[outputIndex...])) }
            switch result {
            case .written:
                output.removeAll(keepingCapacity: output.capacity <= 1 << 20)
                outputIndex = 0
            case .wantRead:
                break
            case .failed(let error):
                tlsFailure = error
                return false
            }
        }
        tls.drainOutput(appendingTo: &wire)
        return true
    }

    /// Sends `buffer[index...]` until the kernel pushes back, then drops what was sent (keeping
    /// capacity up to 1 MiB); returns the errno of a failed send.
    private func sendQueued(_ buffer: inout [UInt8], from index: inout Int) -> Int32? {
        while index < buffer.count {
            let n = buffer.withUnsafeBytes { raw in
                send(fd, raw.baseAddress! + index, raw.count - index, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                index += n
                lastProgress = loop.now
                continue
            }
            let code = errno
            if n < 0 && code == EINTR { continue }
            if n < 0 && (code == EAGAIN || code == EWOULDBLOCK) { break }
            buffer.removeAll()
            index = 0
            return code
        }
        if index == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 20)
            index = 0
        } else if index >= 1 << 20 {
            buffer.removeSubrange(0..<index)
            index = 0
        }
        return nil
    }

    /// Drops consumed input so the buffer does not grow across a long keep-alive connection.
    package func compactInput() {
        if inputIndex == input.count {
            input.removeAll(keepingCapacity: true)
            inputIndex = 0
        }
    }

    // MARK: Reading control

    package func pauseReading() {
        guard !readingPaused else { return }
        readingPaused = true
        updateInterest()
    }

    package func resumeReading() {
        guard readingPaused else { return }
        readingPaused = false
        updateInterest()
        // Bytes may already be buffered (pipelined requests): let the owner look again.
        if !isClosed && unconsumedInputBytes > 0 { delegate?.streamDidRead(self) }
    }

    // MARK: Writing

    private var flushIsScheduled = false

    /// Sends queued output at the end of the loop's current tick, together with whatever
    /// else this tick queues. Above the high-water mark it sends at once, to bound memory.
    package func flushSoon() {
        if queuedOutputBytes >= SocketStream.highWater {
            flush()
            return
        }
        guard !flushIsScheduled, !isClosed else { return }
        flushIsScheduled = true
        loop.scheduleFlush(self)
    }

    /// Sends the queued output on the loop's next turn, not this one: the stream waits for the
    /// socket's writability, which the level-triggered loop reports at its next wait when the
    /// socket has room. For a producer that refills the queue from `streamDidDrain`: flushed in
    /// the same turn, a fast reader would have it produce its whole output before the loop's
    /// other connections are served.
    package func flushOnNextTurn() {
        updateInterest()
    }

    /// Called by the loop for a ``flushSoon()``.
    func flushScheduled() {
        flushIsScheduled = false
        flush()
    }

    /// Queues bytes; call ``flush()`` or ``flushSoon()`` to send.
    package func enqueue(_ bytes: UnsafeRawBufferPointer) {
        output.append(contentsOf: bytes)
    }

    package func enqueue(_ bytes: [UInt8]) {
        output.append(contentsOf: bytes)
    }

    package func enqueue(_ bytes: ArraySlice<UInt8>) {
        output.append(contentsOf: bytes)
    }

    /// Gives direct access to the output queue, for serialisers that append in place.
    package func withOutput<R>(_ body: (inout [UInt8]) -> R) -> R {
        body(&output)
    }

    /// Sends as much queued output as the socket takes; arms EPOLLOUT for the rest.
    package func flush() {
        guard !isClosed, !connecting else { return }
        let wasAboveLow = queuedOutputBytes >= SocketStream.lowWater
        let failure: Int32?
        if let tls {
            failure = encryptOutput(tls) ? sendQueued(&wire, from: &wireIndex) : EPROTO
        } else {
            failure = sendQueued(&output, from: &outputIndex)
        }
        if let failure {
            if closeWhenFlushed {
                close()
                return
            }
            delegate?.streamDidFailWrite(self, error: failure)
            return
        }
        if queuedOutputBytes == 0 && closeWhenFlushed {
            finishClose()
            return
        }
        updateInterest()
        if wasAboveLow && queuedOutputBytes < SocketStream.lowWater {
            delegate?.streamDidDrain(self)
        }
    }

    /// Closes after queued output is sent (for `Connection: close` responses).
    package func closeAfterFlush() {
        closeWhenFlushed = true
        // close_notify goes after the last data, so a client can tell our end from a cut.
        if let tls, !handshaking, !isClosed, tlsFailure == nil, encryptOutput(tls) {
            tls.shutdown()
            tls.drainOutput(appendingTo: &wire)
        }
        if queuedOutputBytes == 0 { finishClose() } else { flush() }
    }

    /// A lingering close (RFC 9112 §9.6, nginx's lingering_close): closing a socket that still
    /// has unread input makes the kernel send RST, which can destroy the response still in
    /// flight. So: half-close, read and drop what the peer still sends, close on its EOF or
    /// after two seconds.
    private func finishClose() {
        guard !isClosed else { return }
        if reachedEnd || connecting {
            close()
            return
        }
        Glibc.shutdown(fd, Int32(SHUT_WR))
        lingering = true
        delegate = nil
        lingerDeadline = loop.now + SocketStream.lingerNanos
        loop.track(self)
        readingPaused = false
        updateInterest()
    }

    package func checkDeadlines(now: UInt64) {
        if lingering && now >= lingerDeadline { close() }
    }

    /// Half-closes the sending side once queued output is out (tunnels).
    package func shutdownWrite() {
        if queuedOutputBytes == 0 { Glibc.shutdown(fd, Int32(SHUT_WR)) }
        else { pendingShutdown = true }
    }
    private var pendingShutdown = false

    package func close() {
        guard !isClosed else { return }
        isClosed = true
        if lingering { loop.untrack(self) }
        loop.unregister(fd: fd)
        Glibc.close(fd)
        delegate = nil
        output = []
        input = []
    }

    private func updateInterest() {
        guard !isClosed else { return }
        if pendingShutdown && queuedOutputBytes == 0 {
            pendingShutdown = false
            Glibc.shutdown(fd, Int32(SHUT_WR))
        }
        var wanted: UInt32 = 0
        if !readingPaused && !reachedEnd { wanted |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        // While handshaking, queued plaintext cannot be sent yet: asking for EPOLLOUT for it
        // would wake the loop for nothing, over and over.
        let sendable = handshaking ? wire.count - wireIndex : queuedOutputBytes
        if sendable > 0 || connecting { wanted |= EPOLLOUT.rawValue }
        if wanted != interest {
            interest = wanted
            loop.modify(fd: fd, events: wanted)
        }
    }
}

import Glibc
import OutboxHTTP
import OutboxModel

/// One keep-alive TCP (for `https://`, TLS over TCP) connection to an origin, carrying one
/// exchange at a time.
///
/// Lifecycle: `connecting` (TCP, then the TLS handshake) → `active` (an exchange owns it) → `idle` (in its pool) → `active`
/// … → `closed`. The connection is its own ``UpstreamCall`` while active; it never outlives
/// its pool's loop.
final class UpstreamConnection: SocketStreamDelegate, DeadlineTracked, UpstreamCall {
    enum State { case connecting, active, idle, closed }

    let origin: Origin
    let stream: SocketStream
    // Pools live as long as their loop.
    unowned(unsafe) let pool: UpstreamPool
    private(set) var state: State
    /// Strong while an exchange runs; every ending path sets it to nil.
    private var handler: UpstreamResponseHandler?
    private var parser: HTTPResponseParser
    private var bodyChunked = false
    private var requestComplete = false
    private var responseHeadSeen = false
    /// The head just parsed was a 1xx: its end is not the exchange's end.
    private var interimResponse = false
    private var responseBytesSeen = false
    private var keepAlive = true
    /// Served at least one exchange before this one: a silent close may be a stale pool entry.
    private var reused = false
    private var deadline: UInt64 = 0

    init(origin: Origin, fd: Int32, pool: UpstreamPool, tls: TLSEngine?) {
        self.origin = origin
        self.pool = pool
        stream = SocketStream(fd: fd, loop: pool.loop, connecting: true, tls: tls)
        parser = HTTPResponseParser(limits: HTTPParserLimits(maxHeaderBytes: pool.maxHeaderBytes))
        state = .connecting
        stream.delegate = self
        deadline = pool.loop.now + Clock.nanos(pool.timeouts.connect)
        pool.loop.track(self)
    }

    /// Begins an exchange: queues the head and sends it as soon as the socket is connected.
    func begin(head: HTTPRequestHead, bodyFraming: HTTPBodyFraming, handler: UpstreamResponseHandler) {
        self.handler = handler
        if state == .idle { reused = true }
        if state != .connecting {
            state = .active
            deadline = 0
        }
        bodyChunked = bodyFraming == .chunked
        requestComplete = false
        responseHeadSeen = false
        responseBytesSeen = false
        interimResponse = false
        keepAlive = !head.headers.containsToken("close", in: "Connection")
        parser.expectResponse(toMethod: head.method)
        stream.withOutput { HTTPSerializer.writeRequestHead(head, into: &$0) }
        if bodyFraming == .none || bodyFraming == .contentLength(0) { markRequestComplete() }
        if state == .active {
            stream.flushSoon()
            if stream.unconsumedInputBytes > 0 { streamDidRead(stream) }
        }
    }

    private func markRequestComplete() {
        requestComplete = true
        if !responseHeadSeen { deadline = pool.loop.now + Clock.nanos(pool.timeouts.response) }
    }

    // MARK: UpstreamCall

    var canAcceptBody: Bool { stream.isWritable }

    func sendBody(_ bytes: UnsafeRawBufferPointer) {
        guard state != .closed, !bytes.isEmpty else { return }
        if bodyChunked {
            stream.withOutput { HTTPSerializer.writeChunk(bytes, into: &$0) }
        } else {
            stream.enqueue(bytes)
        }
        if state == .active { stream.flushSoon() }
    }

    func finishBody(trailers: HTTPHeaders) {
        guard state != .closed else { return }
        if bodyChunked { stream.withOutput { HTTPSerializer.writeLastChunk(trailers: trailers, into: &$0) } }
        markRequestComplete()
        if state == .active { stream.flushSoon() }
    }

    func pauseResponse() { stream.pauseReading() }
    func resumeResponse() { stream.resumeReading() }

    func cancel() {
        handler = nil
        close()
    }

    // MARK: SocketStreamDelegate

    func streamDidDrain(_ stream: SocketStream) {
        if state == .connecting {
            // A TLS stream is connected once its handshake completes, not before.
            if stream.tls == nil { connected() }
            return
        }
        handler?.upstreamReadyForBody()
    }

    func streamDidConnectTransport(_ stream: SocketStream) {
        // The handshake gets a connect timeout of its own, so a slow TCP connect and a
        // stalled handshake are told apart.
        deadline = pool.loop.now + Clock.nanos(pool.timeouts.connect)
    }

    func streamDidFinishHandshake(_ stream: SocketStream) {
        keepNewSession()
        if state == .connecting { connected() }
    }

    private func connected() {
        state = handler == nil ? .idle : .active
        deadline = requestComplete ? pool.loop.now + Clock.nanos(pool.timeouts.response) : 0
        stream.flush()
    }

    /// TLS 1.3 servers send resumable sessions after the handshake, with the first records.
    private func keepNewSession() {
        if let tls = stream.tls, let session = tls.takeNewSession() { pool.remember(session, for: origin) }
    }

    func streamDidRead(_ stream: SocketStream) {
        keepNewSession()
        guard state == .active, let handler else {
            // Bytes on an idle connection are a protocol error (or an unsolicited 408): drop it.
            if state == .idle { close() }
            return
        }
        responseBytesSeen = true
        if responseHeadSeen { deadline = pool.loop.now + Clock.nanos(pool.timeouts.response) }
        do throws(HTTPParseError) {
            while state == .active, !stream.readingPaused {
                guard let event = try parser.next(in: stream.input, index: &stream.inputIndex) else { break }
                // Consumed, so the head below is the only copy and its storage can go back.
                switch consume event {
                case .head(var head, let framing):
                    if head.status == 101 {
                        // We never forward Upgrade, so a switch of protocols is a broken origin.
                        fail(.invalidResponse("unexpected 101 Switching Protocols"))
                        return
                    }
                    if head.status < 200 {
                        // Interim (100, 103): the proxy answers Expect itself; the parser ends
                        // the interim response, and the final one follows on the same request.
                        interimResponse = true
                        continue
                    }
                    responseHeadSeen = true
                    deadline = pool.loop.now + Clock.nanos(pool.timeouts.response)
                    if framing == .untilClose || head.headers.containsToken("close", in: "Connection")
                        || (head.version == .http1_0 && !head.headers.containsToken("keep-alive", in: "Connection")) {
                        keepAlive = false
                    }
                    handler.upstreamReceivedHead(head, framing: framing)
                    // The handler copied what it forwards: the next response is parsed into these fields.
                    parser.recycle(&head.headers)
                case .body(let range):
                    // A local reference: the handler may close the stream, which replaces `input`.
                    let buffer = stream.input
                    buffer.withUnsafeBytes { raw in
                        handler.upstreamReceivedBody(UnsafeRawBufferPointer(rebasing: raw[range]))
                    }
                case .end(let trailers):
                    if interimResponse {
                        interimResponse = false
                        continue
                    }
                    finishExchange(trailers: trailers)
                    return
                }
            }
        } catch {
            fail(.invalidResponse(error.message))
            return
        }
        stream.compactInput()
        self.handler?.upstreamProcessedInput()
    }

    func streamDidReachEnd(_ stream: SocketStream, error: Int32?) {
        if state == .connecting {
            if let failure = stream.tlsFailure {
                fail(.tlsFailed(failure.reason))
            } else if stream.handshaking {
                fail(.tlsFailed(error.map { String(cString: strerror($0)) } ?? "connection closed during the handshake"))
            } else {
                fail(.connectFailed(String(cString: strerror(error ?? ECONNREFUSED))))
            }
            return
        }
        // TLS 1.3 lets a server refuse the client's certificate only after the client's side of
        // the handshake is done: its alert arrives instead of the first response.
        if state == .active, !reused, !responseBytesSeen, let failure = stream.tlsFailure {
            fail(.tlsFailed(failure.reason))
            return
        }
        guard state == .active else {
            close()
            return
        }
        if responseHeadSeen {
            do {
                if case .end(let trailers)? = try parser.finish() {
                    keepAlive = false
                    finishExchange(trailers: trailers)
                    return
                }
            } catch {}
            fail(.truncated("connection closed mid-body"))
            return
        }
        let reason = error.map { String(cString: strerror($0)) } ?? "connection closed"
        fail(.noResponse(reason, retryable: reused && !responseBytesSeen))
    }

    func streamDidFailWrite(_ stream: SocketStream, error: Int32) {
        if state == .active && responseHeadSeen {
            // The origin may have answered early and closed; let the read side finish the story.
            return
        }
        fail(.noResponse(String(cString: strerror(error)), retryable: reused && !responseBytesSeen))
    }

    // MARK: Deadlines

    func checkDeadlines(now: UInt64) {
        guard deadline != 0, now >= deadline else { return }
        switch state {
        case .connecting: fail(stream.handshaking ? .tlsFailed("handshake timeout") : .connectFailed("connect timeout"))
        case .active: fail(responseHeadSeen ? .truncated("response body timeout") : .responseTimeout)
        case .idle: close()
        case .closed: break
        }
    }

    // MARK: Ending

    private func finishExchange(trailers: HTTPHeaders) {
        let handler = self.handler
        self.handler = nil
        if keepAlive && requestComplete && stream.unconsumedInputBytes == 0 {
            state = .idle
            deadline = pool.loop.now + Clock.nanos(pool.timeouts.poolIdle)
            stream.compactInput()
            pool.release(self)
        } else {
            close()
        }
        handler?.upstreamFinished(trailers: trailers)
    }

    private func fail(_ error: UpstreamError) {
        // A session the origin no longer accepts must not spoil the next handshake too.
        if case .tlsFailed = error { pool.forgetSession(for: origin) }
        let handler = self.handler
        self.handler = nil
        close()
        handler?.upstreamFailed(error)
    }

    func close() {
        guard state != .closed else { return }
        state = .closed
        handler = nil
        pool.loop.untrack(self)
        pool.forget(self)
        stream.close()
    }
}

/// One client request on its way to an origin and its response on the way back.
///
/// Driven by two sides on one loop: the client connection feeds the request (head, body,
/// end) and the upstream call feeds the response. The exchange turns each into the other's
/// framing (chunked re-encoding, close-delimited → chunked for HTTP/1.1 clients), applies the
/// hop-by-hop and forwarding rules, and passes backpressure both ways.
final class ProxyExchange: UpstreamResponseHandler {
    /// `draining`: the response is complete but the client is still sending the request body
    /// (the origin answered early); the rest of the body is read and dropped so the
    /// connection stays in sync for the next request.
    enum Phase { case preparing, forwarding, responding, draining, finished }

    /// Strong: the client drops its exchange on every ending path, which breaks the cycle.
    let client: ClientConnection
    let head: HTTPRequestHead
    let requestFraming: HTTPBodyFraming
    private let started: UInt64
    private(set) var phase = Phase.preparing
    private var origin: Origin?
    private var upstreamHead: HTTPRequestHead?
    private var call: UpstreamCall?
    private var transport: UpstreamTransport?
    private var sendContinue = false
    /// Body bytes seen before the call exists, or kept to resend on a stale pooled connection.
    private var bodyCopy: [UInt8] = []
    private var bodyCopyValid = true
    private var bodyTrailers: HTTPHeaders?
    private(set) var requestComplete = false
    private var retried = false
    private var responseStatus = 0
    private var responseBytes = 0
    private var chunkedToClient = false
    private var responseHasBody = true
    private var keepAlive: Bool

    private static let maxReplayableBody = 64 * 1024

    init(client: ClientConnection, head: HTTPRequestHead, framing: HTTPBodyFraming) {
        self.client = client
        self.head = head
        self.requestFraming = framing
        started = client.loop.now
        keepAlive = client.clientWantsKeepAlive(head)
        if framing == .none || framing == .contentLength(0) { requestComplete = true }
    }

    /// True while request body bytes should not be read from the client.
    var bodyPaused: Bool {
        guard !requestComplete, phase != .draining else { return false }
        guard let call else { return phase == .preparing }
        return !call.canAcceptBody
    }

    // MARK: Request side

    func start() {
        if let expect = head.headers.first("Expect") {
            guard expect.lowercased() == "100-continue" else {
                fail(.expectationFailed("unsupported expectation: \(expect)"))
                return
            }
            sendContinue = head.version == .http1_1 && !requestComplete
        }
        switch ProxyRules.route(head, upstream: client.context.upstream, forwardProxy: client.context.forwardProxy) {
        case .failure(let error):
            fail(error)
        case .success(.tunnel(let host, let port)):
            phase = .finished
            client.startTunnel(host: host, port: port, head: head)
        case .success(.origin(let origin, let target, _)):
            self.origin = origin
            upstreamHead = ProxyRules.upstreamRequestHead(head, origin: origin, target: target,
                                                          clientAddress: client.peerText, bodyFraming: requestFraming)
            if origin.scheme == .https {
                transport = client.context.secureTransport.transport(for: client.loop)
                beginCall()
                return
            }
            let pool = client.loopState.pool
            transport = pool
            if pool.isReady(origin) {
                // The common case, without the closure (and the weak reference) below.
                beginCall()
            } else {
                pool.prepare(origin) { [weak self] result in
                    guard let self, self.phase == .preparing else { return }
                    switch result {
                    case .success: self.beginCall()
                    case .failure(let error): self.upstreamFailed(error)
                    }
                }
            }
        }
    }

    private func beginCall() {
        guard let origin, let upstreamHead, let transport else { return }
        phase = .forwarding
        let call = transport.startCall(to: origin, head: upstreamHead, bodyFraming: requestFraming, handler: self)
        self.call = call
        if !bodyCopy.isEmpty {
            bodyCopy.withUnsafeBytes { call.sendBody($0) }
        }
        if requestComplete {
            if requestFraming != .none && requestFraming != .contentLength(0) {
                call.finishBody(trailers: bodyTrailers ?? HTTPHeaders())
            }
        } else if sendContinue {
            sendContinue = false
            client.stream.enqueue(Self.continueBytes)
            client.stream.flushSoon()
        }
        if bodyCopy.count > Self.maxReplayableBody || !bodyCopyValid {
            bodyCopy = []
            bodyCopyValid = false
        }
        client.resumeBody()
    }

    private static let continueBytes = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    func requestBody(_ bytes: UnsafeRawBufferPointer) {
        guard phase != .finished, phase != .draining else { return }
        if bodyCopyValid {
            if bodyCopy.count + bytes.count <= Self.maxReplayableBody {
                bodyCopy.append(contentsOf: bytes)
            } else {
                bodyCopyValid = false
                if call == nil { bodyCopy.append(contentsOf: bytes) } else { bodyCopy = [] }
            }
        } else if call == nil {
            bodyCopy.append(contentsOf: bytes)
        }
        call?.sendBody(bytes)
    }

    func requestEnded(trailers: HTTPHeaders) {
        requestComplete = true
        bodyTrailers = trailers
        if phase == .draining {
            finish(status: responseStatus)
            return
        }
        guard phase == .forwarding || phase == .responding, let call else { return }
        if requestFraming != .none && requestFraming != .contentLength(0) {
            call.finishBody(trailers: trailers)
        }
    }

    /// The client went away or broke the protocol: drop the upstream side.
    func abort() {
        guard phase != .finished else { return }
        phase = .finished
        call?.cancel()
        call = nil
    }

    // MARK: Response side

    func upstreamReceivedHead(_ upstream: HTTPResponseHead, framing: HTTPBodyFraming) {
        guard phase == .forwarding else { return }
        phase = .responding
        responseStatus = upstream.status
        var response = ProxyRules.clientResponseHead(upstream)
        responseHasBody = framing != .none && head.method != "HEAD"
        switch framing {
        case .chunked, .untilClose:
            if head.version == .http1_1 {
                chunkedToClient = responseHasBody
                if responseHasBody { response.headers.add("Transfer-Encoding", "chunked") }
            } else {
                // An HTTP/1.0 client knows no chunked coding: the end of the body is the close.
                keepAlive = false
            }
        case .none, .contentLength:
            break
        }
        if client.isDraining { keepAlive = false }
        if !keepAlive {
            response.headers.add("Connection", "close")
        } else if head.version == .http1_0 {
            response.headers.add("Connection", "keep-alive")
        }
        client.stream.withOutput { HTTPSerializer.writeResponseHead(response, into: &$0) }
    }

    func upstreamReceivedBody(_ bytes: UnsafeRawBufferPointer) {
        guard phase == .responding, responseHasBody else { return }
        responseBytes += bytes.count
        if chunkedToClient {
            client.stream.withOutput { HTTPSerializer.writeChunk(bytes, into: &$0) }
        } else {
            client.stream.enqueue(bytes)
        }
        if !client.stream.isWritable {
            client.stream.flush()
            if !client.stream.isWritable { call?.pauseResponse() }
        }
    }

    /// The client's output drained: let the response flow again.
    func clientDrained() {
        if phase == .responding { call?.resumeResponse() }
    }

    func upstreamFinished(trailers: HTTPHeaders) {
        guard phase == .responding else { return }
        if chunkedToClient {
            client.stream.withOutput { HTTPSerializer.writeLastChunk(trailers: trailers, into: &$0) }
        }
        call = nil
        if !requestComplete {
            // The origin answered before the whole body arrived (nginx's `return` does): the
            // upstream connection is not reusable (the connection itself saw to that), and the
            // rest of the body is drained from the client so its connection stays usable.
            phase = .draining
            client.stream.flushSoon()
            return
        }
        finish(status: responseStatus)
    }

    func upstreamFailed(_ error: UpstreamError) {
        guard phase == .forwarding || phase == .preparing || phase == .responding else { return }
        call = nil
        if phase == .responding {
            // Too late for an error status: the head is out. Closing tells the client the body is short.
            client.logger.warn("upstream_failed", ["origin": origin?.description ?? "-", "error": error.summary])
            phase = .finished
            client.abortAfterFlush()
            return
        }
        if case .noResponse(_, retryable: true) = error, !retried, bodyCopyValid, isReplayable {
            // A pooled connection the origin closed as we reused it: send once more on a fresh
            // one, but only what is safe to repeat (Go's transport has the same rule).
            retried = true
            beginCall()
            return
        }
        client.logger.warn("upstream_failed", ["origin": origin?.description ?? "-", "error": error.summary])
        fail(.upstream(error))
    }

    /// Idempotent methods (RFC 9110 §9.2.2) and requests carrying an idempotency key may be
    /// sent twice; anything else might act twice at the origin.
    private var isReplayable: Bool {
        switch head.method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": return true
        default: return head.headers.contains(client.context.idempotencyHeader)
        }
    }

    func upstreamReadyForBody() {
        client.resumeBody()
    }

    func upstreamProcessedInput() {
        client.stream.flushSoon()
    }

    // MARK: Ending

    private func fail(_ error: ProxyError) {
        phase = .finished
        call?.cancel()
        call = nil
        if !requestComplete { keepAlive = false }
        if client.isDraining { keepAlive = false }
        if error.status == 400 || error.status == 413 || error.status == 431 { keepAlive = false }
        client.stream.enqueue(ErrorResponse.bytes(for: error, close: !keepAlive,
                                                  retryAfterSeconds: client.context.retryAfterSeconds))
        finish(status: error.status)
    }

    private func finish(status: Int) {
        phase = .finished
        client.stream.flushSoon()
        let logger = client.logger
        if logger.isEnabled(.info) {
            let micros = (client.loop.now &- started) / 1000
            logger.info("request", [
                "client": client.peerText, "method": head.method, "target": head.target,
                "status": String(status), "upstream": origin?.description ?? "-",
                "bytes": String(responseBytes), "ms": String(format3(Double(micros) / 1000)),
            ])
        }
        client.exchangeDidFinish(keepAlive: keepAlive)
    }

    private func format3(_ value: Double) -> String {
        let scaled = (value * 1000).rounded() / 1000
        return String(scaled)
    }
}

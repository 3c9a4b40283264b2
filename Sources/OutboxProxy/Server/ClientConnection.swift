import OutboxHTTP
import OutboxNet
import OutboxTelemetry

/// One accepted client connection: parses requests in order, runs one ``ProxyExchange`` at a
/// time (pipelined requests wait in the input buffer, so responses leave in order), and owns
/// the header and idle timeouts.
final class ClientConnection: SocketStreamDelegate, DeadlineTracked {
    enum Mode { case http, tunnel, closed }

    let stream: SocketStream
    let context: ProxyContext
    unowned(unsafe) let loopState: LoopState  // lives as long as the loop
    let peerText: String
    let peerIsLoopback: Bool
    /// The listener that accepted this connection: what its requests may reach.
    let listener: ListenerRole
    private var parser: HTTPRequestParser
    private var exchange: ProxyExchange?
    private var tunnel: Tunnel?
    private var mode = Mode.http
    private var deadline: UInt64 = 0
    private var deadlineIsHeader = true
    private var processing = false
    private var reprocess = false
    private var peerEnded = false
    private var pipelinePaused = false

    var loop: EventLoop { stream.loop }
    var logger: Logger { context.logger }
    var isDraining: Bool { loopState.draining }

    init(fd: Int32, peer: SocketAddress, listener: ListenerRole, loopState: LoopState) {
        self.loopState = loopState
        self.listener = listener
        context = loopState.context
        peerText = peer.hostText
        peerIsLoopback = peer.isLoopback
        stream = SocketStream(fd: fd, loop: loopState.loop)
        parser = HTTPRequestParser(limits: context.parserLimits)
        stream.delegate = self
        // A new connection must send its head within the header timeout (slowloris).
        deadline = loop.now + context.headerTimeout
        loop.track(self)
    }

    func clientWantsKeepAlive(_ head: HTTPRequestHead) -> Bool {
        if head.version == .http1_1 { return !head.headers.containsToken("close", in: "Connection") }
        return head.headers.containsToken("keep-alive", in: "Connection")
    }

    // MARK: Input

    func streamDidRead(_ stream: SocketStream) {
        switch mode {
        case .http: processInput()
        case .tunnel: tunnel?.clientReadable()
        case .closed: break
        }
    }

    /// Parses and dispatches as far as the current exchange allows. Re-entrant calls (an
    /// exchange finishing inside `start()`) only mark that another pass is needed.
    private func processInput() {
        if processing {
            reprocess = true
            return
        }
        processing = true
        defer { processing = false }
        repeat {
            reprocess = false
            parseAvailable()
        } while reprocess && mode == .http
        if mode == .http {
            stream.compactInput()
            // Pipelined requests beyond what we hold are left in the kernel until the current
            // exchange is done: a client can't make us buffer without bound.
            // Pausing costs two epoll_ctl calls, so it is kept for real pressure, not every request.
            if let exchange, exchange.bodyPaused || stream.unconsumedInputBytes > SocketStream.highWater {
                if !stream.readingPaused {
                    pipelinePaused = true
                    stream.pauseReading()
                }
            }
        }
    }

    private func parseAvailable() {
        while mode == .http {
            if let exchange {
                if exchange.requestComplete || exchange.bodyPaused { return }
            }
            let event: HTTPRequestParser.Event?
            do {
                event = try parser.next(in: stream.input, index: &stream.inputIndex)
            } catch {
                rejectMalformed(error)
                return
            }
            guard let event else {
                if exchange == nil && stream.unconsumedInputBytes > 0 && deadlineIsHeader == false {
                    // First bytes of the next request: the header clock starts now.
                    deadlineIsHeader = true
                    deadline = loop.now + context.headerTimeout
                }
                if peerEnded { endOfInput() }
                return
            }
            switch event {
            case .head(let head, let framing):
                deadline = 0
                let exchange = ProxyExchange(client: self, head: head, framing: framing)
                self.exchange = exchange
                exchange.start()
            case .body(let range):
                // A local reference: the exchange may close us, which replaces `input`.
                let buffer = stream.input
                buffer.withUnsafeBytes { exchange?.requestBody(UnsafeRawBufferPointer(rebasing: $0[range])) }
            case .end(let trailers):
                exchange?.requestEnded(trailers: trailers)
            }
        }
    }

    private func rejectMalformed(_ error: HTTPParseError) {
        if let exchange, exchange.phase == .responding {
            // The response is under way and can't become an error: cut the connection.
            exchange.abort()
            close()
            return
        }
        exchange?.abort()
        exchange = nil
        logger.info("bad_request", ["client": peerText, "status": String(error.status), "error": error.message])
        stream.enqueue(ErrorResponse.bytes(for: .malformed(error), close: true, retryAfterSeconds: context.retryAfterSeconds))
        mode = .closed
        loop.untrack(self)
        stream.closeAfterFlush()
        loopState.connectionClosed(self)
    }

    /// Called by the exchange when its request body may flow again.
    func resumeBody() {
        guard mode == .http else { return }
        if pipelinePaused, let exchange, !exchange.requestComplete, !exchange.bodyPaused {
            pipelinePaused = false
            stream.resumeReading()
        } else {
            processInput()
        }
    }

    func exchangeDidFinish(keepAlive: Bool) {
        exchange = nil
        guard mode == .http else { return }
        guard keepAlive, !peerEnded || stream.unconsumedInputBytes > 0 else {
            mode = .closed
            loop.untrack(self)
            stream.closeAfterFlush()
            loopState.connectionClosed(self)
            return
        }
        deadlineIsHeader = false
        deadline = loop.now + context.idleTimeout
        if pipelinePaused {
            pipelinePaused = false
            stream.resumeReading()  // re-enters processInput for buffered pipelined bytes
        } else if stream.unconsumedInputBytes > 0 {
            processInput()
        }
    }

    // MARK: Ending

    func streamDidReachEnd(_ stream: SocketStream, error: Int32?) {
        peerEnded = true
        switch mode {
        case .tunnel:
            tunnel?.clientEnded()
        case .http:
            if error != nil {
                close()
            } else if exchange == nil {
                processInput()
                if exchange == nil { endOfInput() }
            } else if exchange?.requestComplete == false {
                // Half a request can't be forwarded meaningfully.
                close()
            }
            // else: a half-closed client still gets its response, then the connection closes.
        case .closed:
            break
        }
    }

    private func endOfInput() {
        guard mode == .http, exchange == nil else { return }
        mode = .closed
        loop.untrack(self)
        stream.closeAfterFlush()
        loopState.connectionClosed(self)
    }

    func streamDidDrain(_ stream: SocketStream) {
        switch mode {
        case .http: exchange?.clientDrained()
        case .tunnel: tunnel?.clientDrained()
        case .closed: break
        }
    }

    func streamDidFailWrite(_ stream: SocketStream, error: Int32) {
        close()
    }

    /// The response can't be completed: send what is queued, then close.
    func abortAfterFlush() {
        exchange = nil
        mode = .closed
        loop.untrack(self)
        stream.closeAfterFlush()
        loopState.connectionClosed(self)
    }

    func close() {
        let wasOpen = mode != .closed
        mode = .closed
        exchange?.abort()
        exchange = nil
        tunnel?.close()
        tunnel = nil
        loop.untrack(self)
        stream.close()
        if wasOpen { loopState.connectionClosed(self) }
    }

    // MARK: Timeouts and shutdown

    func checkDeadlines(now: UInt64) {
        if mode == .http, let exchange {
            // A client that stops sending its body, or stops reading its response, must not
            // hold a connection and an upstream exchange forever (slow-client attacks).
            let waitingOnClient = (!exchange.requestComplete && !exchange.bodyPaused) || stream.queuedOutputBytes > 0
            if waitingOnClient && now &- stream.lastProgress > context.idleTimeout {
                logger.info("client_stalled", ["client": peerText, "target": exchange.head.target])
                close()
            }
            return
        }
        guard mode == .http, deadline != 0, now >= deadline else { return }
        if deadlineIsHeader && (stream.unconsumedInputBytes > 0 || !parser.isIdle) {
            logger.info("header_timeout", ["client": peerText])
            stream.enqueue(ErrorResponse.bytes(for: .requestTimeout, close: true, retryAfterSeconds: 0))
            mode = .closed
            loop.untrack(self)
            stream.closeAfterFlush()
            loopState.connectionClosed(self)
        } else {
            close()
        }
    }

    /// Shutdown: idle connections close now; busy ones close after their current response.
    func drain() {
        if mode == .http && exchange == nil && stream.unconsumedInputBytes == 0 && parser.isIdle {
            close()
        }
    }

    // MARK: Tunnel

    func startTunnel(host: String, port: Int) {
        exchange = nil
        mode = .tunnel
        deadline = 0
        tunnel = Tunnel(client: self, host: host, port: port)
    }

    /// Called by the tunnel when connecting failed before any byte was relayed.
    func tunnelFailed(_ error: ProxyError) {
        tunnel = nil
        logger.info("connect_failed", ["client": peerText, "status": String(error.status), "error": error.message])
        stream.enqueue(ErrorResponse.bytes(for: error, close: true, retryAfterSeconds: context.retryAfterSeconds))
        mode = .closed
        loop.untrack(self)
        stream.closeAfterFlush()
        loopState.connectionClosed(self)
    }

    /// Both directions are done: send what is queued, then close.
    func tunnelClosed() {
        tunnel = nil
        guard mode != .closed else { return }
        mode = .closed
        loop.untrack(self)
        stream.closeAfterFlush()
        loopState.connectionClosed(self)
    }
}

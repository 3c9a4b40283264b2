import OutboxCredentials
import OutboxHTTP
import OutboxModel
import OutboxNet
import OutboxTelemetry

/// One accepted client connection: parses requests in order, runs one ``ProxyExchange`` at a
/// time (pipelined requests wait in the input buffer, so responses leave in order), and owns
/// the header and idle timeouts.
///
/// The decisions (which phase the connection is in, when a timeout fires, when to close and
/// how) are ``ClientConnectionStateMachine``'s; this class is the I/O shell that reports the
/// socket's and the exchange's events to it and carries out the actions it returns.
final class ClientConnection: SocketStreamDelegate, DeadlineTracked {
    typealias StateMachine = ClientConnectionStateMachine

    let stream: SocketStream
    let context: ProxyContext
    unowned(unsafe) let proxyLoop: ProxyLoop  // lives as long as the loop
    let peerText: String
    let peerIsLoopback: Bool
    /// The listener that accepted this connection: what its requests may reach.
    let listener: ListenerRole
    private var parser: HTTPRequestParser
    private var exchange: ProxyExchange?
    /// A `CONNECT` tunnel or an event stream: the connection carries no more HTTP requests.
    private var relay: (any ConnectionRelay)?
    private var machine: StateMachine
    /// Set by a `CONNECT` Outbox terminates itself: every later request on this connection
    /// arrives inside TLS and is for this origin.
    private(set) var interceptedOrigin: Origin?
    /// Between the `200` to such a `CONNECT` and the client's complete ClientHello, whose SNI
    /// name picks the certificate.
    private var awaitingClientHello = false
    /// What this connection's requests last taught the replay credentials (`from: "client"`).
    var credentialMemo = CredentialBook.LearningMemo()

    var loop: EventLoop { stream.loop }
    var logger: Logger { context.logger }
    var isDraining: Bool { proxyLoop.draining }

    init(fd: Int32, peer: SocketAddress, listener: ListenerRole, proxyLoop: ProxyLoop) {
        self.proxyLoop = proxyLoop
        self.listener = listener
        context = proxyLoop.context
        peerText = peer.hostText
        peerIsLoopback = peer.isLoopback
        stream = SocketStream(fd: fd, loop: proxyLoop.loop)
        parser = HTTPRequestParser(limits: context.parserLimits)
        machine = StateMachine(now: proxyLoop.loop.now, headerTimeout: context.headerTimeout,
                               idleTimeout: context.idleTimeout)
        stream.delegate = self
        loop.track(self)
    }

    /// What the client speaks to us, for `X-Forwarded-Proto`.
    var scheme: String { interceptedOrigin == nil ? "http" : "https" }

    func clientWantsKeepAlive(_ head: HTTPRequestHead) -> Bool {
        if head.version == .http1_1 { return !head.headers.containsToken("close", in: "Connection") }
        return head.headers.containsToken("keep-alive", in: "Connection")
    }

    // MARK: Carrying out decisions

    private func perform(_ action: StateMachine.Action) {
        switch action {
        case .none, .startExchange, .startTunnel:
            // The events that return these are handled where the head or target is at hand.
            break
        case .parseInput:
            processInput()
        case .parseRemainingInput:
            processInput()
            perform(machine.remainingInputParsed())
        case .pauseReading:
            stream.pauseReading()
        case .resumeReading:
            stream.resumeReading()  // re-enters processInput for buffered pipelined bytes
        case .resumeResponse:
            exchange?.clientDrained()
        case .relayReadable:
            relay?.clientReadable()
        case .relayDrained:
            relay?.clientDrained()
        case .relayEnded:
            relay?.clientEnded()
        case .answer408AndClose:
            logger.info("header_timeout", ["client": peerText])
            close(.afterFlush, answering: .requestTimeout)
        case .answerErrorAndClose:
            // Only events whose caller holds the error return this; they answer it first.
            close(.afterFlush)
        case .closeIdle:
            close(.immediately)
        case .closeStalled:
            logger.info("client_stalled", ["client": peerText, "target": exchange?.head.target ?? "-"])
            close(.immediately)
        case .closeStalledHandshake:
            logger.info("client_tls_timeout", ["client": peerText, "origin": interceptedOrigin?.description ?? "-"])
            close(.immediately)
        case .close(let closing):
            close(closing)
        }
    }

    /// Carries out `action` for an event caused by `error`: when the machine says to answer it,
    /// the error is logged as `event` and answered before the close.
    private func perform(_ action: StateMachine.Action, answering error: ProxyError, loggedAs event: String) {
        guard action == .answerErrorAndClose else { return perform(action) }
        logger.info(event, ["client": peerText, "status": String(error.status), "error": error.message])
        close(.afterFlush, answering: error)
    }

    /// Every close goes through here. The machine is already `closed`; this drops the exchange
    /// or tunnel, stops the timer, optionally queues a last error response, and closes the
    /// socket (after its queued output with a lingering close, or at once). Safe to repeat:
    /// the socket and the loop's bookkeeping ignore a second close.
    private func close(_ closing: StateMachine.Closing, answering error: ProxyError? = nil) {
        exchange?.abort()
        exchange = nil
        relay?.close()
        relay = nil
        loop.untrack(self)
        if let error {
            stream.enqueue(ErrorResponse.bytes(for: error, close: true, retryAfterSeconds: context.retryAfterSeconds))
        }
        switch closing {
        case .immediately: stream.close()
        case .afterFlush: stream.closeAfterFlush()
        }
        proxyLoop.connectionClosed(self)
    }

    // MARK: Input

    func streamDidRead(_ stream: SocketStream) {
        perform(machine.bytesReadable())
    }

    /// Parses and dispatches as far as the current exchange allows. Re-entrant calls (an
    /// exchange finishing inside `start()`) only mark that another pass is needed.
    private func processInput() {
        guard machine.beginParsing() else { return }
        repeat {
            parseAvailable()
        } while machine.parsePassEnded()
        guard machine.isHTTP else { return }
        stream.compactInput()
        // Pausing costs two epoll_ctl calls, so it is kept for real pressure, not every request.
        if let exchange, !stream.readingPaused,
           exchange.bodyPaused || stream.unconsumedInputBytes > SocketStream.highWater {
            perform(machine.inputBackedUp())
        }
    }

    private func parseAvailable() {
        if machine.isHandshaking {
            // Before the ClientHello is whole its bytes wait in `input`; after, TLS has them.
            if awaitingClientHello { startServerTLS() }
            return
        }
        while machine.isHTTP {
            if let exchange {
                if exchange.requestComplete || exchange.bodyPaused { return }
            }
            let event: HTTPRequestParser.Event?
            do {
                event = try parser.next(in: stream.input, index: &stream.inputIndex)
            } catch {
                let responseStarted = exchange?.responseStarted == true
                perform(machine.requestMalformed(responseStarted: responseStarted),
                        answering: .malformed(error), loggedAs: "bad_request")
                return
            }
            guard let event else {
                perform(machine.needMoreInput(now: loop.now, inputBuffered: stream.unconsumedInputBytes > 0))
                return
            }
            // Consumed, so the exchange holds the head's only copy and can give its storage back.
            switch consume event {
            case .head(let head, let framing):
                guard machine.headReceived() == .startExchange else { return }
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

    /// Takes back the fields of a finished request for the parser to read the next head into.
    func recycle(_ headers: inout HTTPHeaders) {
        parser.recycle(&headers)
    }

    /// Called by the exchange when its request body may flow again.
    func resumeBody() {
        let bodyWanted = exchange.map { !$0.requestComplete && !$0.bodyPaused } ?? false
        perform(machine.bodyCanFlow(bodyWanted: bodyWanted))
    }

    func exchangeDidFinish(keepAlive: Bool) {
        exchange = nil
        let inputBuffered = stream.unconsumedInputBytes > 0
        // The `200` to a CONNECT Outbox terminates (``beginInterception(of:)`` came just before).
        if awaitingClientHello {
            perform(machine.interceptedTunnelAccepted(now: loop.now, inputBuffered: inputBuffered))
            return
        }
        perform(machine.exchangeFinished(now: loop.now, keepAlive: keepAlive, inputBuffered: inputBuffered))
    }

    // MARK: Output

    func streamDidDrain(_ stream: SocketStream) {
        perform(machine.outputDrained())
    }

    /// An intercepted client's handshake completed: its requests may come.
    func streamDidFinishHandshake(_ stream: SocketStream) {
        perform(machine.handshakeCompleted(now: loop.now))
    }

    // MARK: Ending

    func streamDidReachEnd(_ stream: SocketStream, error: Int32?) {
        if let failure = stream.tlsFailure {
            // Most often the client does not trust the Outbox CA (`tlsv1 alert unknown ca`).
            logger.info("client_tls_failed", ["client": peerText, "origin": interceptedOrigin?.description ?? "-",
                                              "error": failure.reason])
        }
        perform(machine.peerClosed(failed: error != nil, requestComplete: exchange?.requestComplete ?? true))
    }

    func streamDidFailWrite(_ stream: SocketStream, error: Int32) {
        perform(machine.abandon())
    }

    /// The response can't be completed: send what is queued, then close.
    func abortAfterFlush() {
        exchange = nil  // it ended itself; nothing to abort
        perform(machine.responseAborted())
    }

    /// Cuts the connection now (the end of a shutdown's grace period).
    func close() {
        perform(machine.abandon())
    }

    // MARK: Timeouts and shutdown

    func checkDeadlines(now: UInt64) {
        exchange?.checkDeadlines(now: now)
        let awaitingRequestBody = exchange.map { !$0.requestComplete && !$0.bodyPaused } ?? false
        perform(machine.tick(now: now, inputPending: inputPending, awaitingRequestBody: awaitingRequestBody,
                             responseUnread: stream.queuedOutputBytes > 0, lastProgress: stream.lastProgress))
    }

    /// Shutdown: idle connections close now; busy ones close after their current response.
    func drain() {
        // An event stream never ends by itself: shutting down ends it.
        (relay as? EventStream)?.finish()
        perform(machine.shutdownBegan(inputPending: inputPending))
    }

    /// Part of a request is buffered or already parsed.
    private var inputPending: Bool { stream.unconsumedInputBytes > 0 || !parser.isIdle }

    // MARK: Interception

    /// The exchange answered `200` to a `CONNECT` for `origin` that Outbox terminates: the
    /// client's next bytes are its ClientHello.
    func beginInterception(of origin: Origin) {
        interceptedOrigin = origin
        awaitingClientHello = true
    }

    /// Once the ClientHello is complete: the certificate for its SNI name (the CONNECT host
    /// without one), then TLS on this connection and a fresh parser for the requests inside.
    /// A name `tls.intercept.hosts` does not match gets the alert `unrecognized_name` and no
    /// certificate: a leaf is made only for an intercepted name. The handshake is due within
    /// the header timeout (the machine's `handshaking` state), so a client that never finishes
    /// its hello is dropped like one that never finishes a head, but silently: from the `200`
    /// on, the client reads TLS, and an HTTP error would be garbage to it.
    private func startServerTLS() {
        guard let origin = interceptedOrigin else { return }
        let peeked = stream.input.withUnsafeBufferPointer { bytes in
            ClientHelloPeek.inspect(UnsafeBufferPointer(rebasing: bytes[stream.inputIndex...]))
        }
        let certificateName: String
        switch peeked {
        case .needMore:
            return
        case .notTLS:
            logger.info("intercept_failed", ["client": peerText, "origin": origin.description, "error": "not a TLS ClientHello"])
            perform(machine.abandon())
            return
        case .invalidServerName:
            refuseServerName("-", of: origin, because: "the SNI name is not a host name")
            return
        case .clientHello(let serverName?) where !context.intercepts(serverName):
            refuseServerName(serverName, of: origin, because: "the name is not in tls.intercept.hosts")
            return
        case .clientHello(let serverName):
            certificateName = serverName ?? origin.host
        }
        do throws(TLSError) {
            guard let issuer = context.leafIssuer else { throw TLSError("interception is not configured") }
            let engine = try TLSEngine(serverOf: try issuer.context(forHost: certificateName))
            awaitingClientHello = false
            parser = HTTPRequestParser(limits: context.parserLimits)
            stream.startTLS(engine)
        } catch {
            logger.warn("intercept_failed", ["client": peerText, "origin": origin.description, "error": error.reason])
            perform(machine.abandon())
        }
    }

    /// Answers the ClientHello in `input` with the alert `unrecognized_name`, then closes.
    private func refuseServerName(_ serverName: String, of origin: Origin, because reason: String) {
        logger.info("intercept_refused", ["client": peerText, "origin": origin.description, "serverName": serverName,
                                          "error": reason])
        awaitingClientHello = false
        if let issuer = context.leafIssuer {
            let alert = stream.input.withUnsafeBytes { bytes in
                issuer.unrecognizedNameAlert(answering: UnsafeRawBufferPointer(rebasing: bytes[stream.inputIndex...]))
            }
            stream.inputIndex = stream.input.count
            // No TLS runs on the stream: the alert's record goes out as it is, after the `200`.
            stream.enqueue(alert)
        }
        perform(machine.handshakeRefused())
    }

    // MARK: Tunnel

    func startTunnel(host: String, port: Int) {
        exchange = nil
        guard machine.tunnelRequested() == .startTunnel else { return }
        relay = Tunnel(client: self, host: host, port: port)
    }

    /// Called by the tunnel when connecting failed before any byte was relayed.
    func tunnelFailed(_ error: ProxyError) {
        relay = nil
        perform(machine.tunnelFailed(), answering: error, loggedAs: "connect_failed")
    }

    /// Both directions are done: send what is queued, then close.
    func tunnelClosed() {
        relay = nil
        perform(machine.tunnelEnded())
    }

    // MARK: Event stream

    /// The exchange answered `GET /admin/events`: the connection streams events from now on.
    func startEventStream(from hub: EventHub, lastEventID: String?) {
        exchange = nil
        guard machine.tunnelRequested() == .startTunnel else { return }
        relay = EventStream(client: self, hub: hub, lastEventID: lastEventID)
    }
}

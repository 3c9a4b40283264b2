/// The lifecycle of one client connection as a value: events in, actions out, no I/O.
///
/// ``ClientConnection`` owns the socket, the parser and the exchange; it reports what happened
/// (bytes arrived, a head parsed, the exchange finished, the peer closed, the timer swept) and
/// carries out the ``Action`` it gets back. Every deadline is computed from the `now` passed
/// in (monotonic nanoseconds, the loop's clock), so tests drive the header, idle and stall
/// timeouts by passing times. Invariant: once `closed`, no event reopens the connection; the
/// only action left is ``abandon()``'s, which releases the socket.
struct ClientConnectionStateMachine {
    /// Where the connection is. The `peerEnded` flags record that the client sent EOF: a
    /// half-closed client still gets the response to what it sent, then the connection closes.
    enum State: Equatable {
        /// Kept alive between requests with nothing of the next one received; closes at
        /// `deadline` (the idle timeout).
        case idle(deadline: UInt64, peerEnded: Bool)
        /// Waiting for a complete head, which must arrive by `deadline` (the header timeout,
        /// against slowloris): a new connection, or one whose next request has begun.
        case readingHead(deadline: UInt64, peerEnded: Bool)
        /// One exchange in flight; pipelined requests wait in the input buffer.
        /// `pipelinePaused`: reading stopped because the exchange can't take its body yet or
        /// too much input is buffered.
        case exchanging(pipelinePaused: Bool, peerEnded: Bool)
        /// After the `200` to a `CONNECT` Outbox terminates itself: the client's TLS handshake
        /// with us, which must complete by `deadline` (the header timeout). Nothing but TLS
        /// may be written from here on, so no HTTP error answers anything in this state: a
        /// stalled, broken or refused handshake ends in a close (or a TLS alert).
        case handshaking(deadline: UInt64)
        /// After `CONNECT`: bytes are relayed and HTTP is over.
        case tunnelling
        case closed
    }

    /// How the shell ends the connection.
    enum Closing: Equatable {
        /// Cut it now: drop the exchange or tunnel and close the socket.
        case immediately
        /// Send what is queued, then close lingering (half-close, drop late input) so that the
        /// peer's unread input can't turn the close into a reset that destroys the response.
        case afterFlush
    }

    /// What the shell does in answer to an event.
    enum Action: Equatable {
        case none
        /// Parse what the input buffer holds.
        case parseInput
        /// The peer sent EOF between requests: parse what it sent last, then report
        /// ``remainingInputParsed()``.
        case parseRemainingInput
        /// A complete head arrived: start its exchange.
        case startExchange
        /// A `CONNECT` was accepted: start relaying.
        case startTunnel
        case pauseReading
        case resumeReading
        /// The client's output drained: the exchange may write its response again.
        case resumeResponse
        // In tunnel mode the tunnel handles the client's reads, drains and EOF.
        case relayReadable, relayDrained, relayEnded
        /// The header timeout passed with part of a request received: log it, answer 408, close
        /// after flush.
        case answer408AndClose
        /// The event's own error (a malformed request, a failed `CONNECT`) is answered, then the
        /// connection closes after flush; the shell holds the error.
        case answerErrorAndClose
        /// No request in progress when the deadline passed (or at shutdown): close now, silently.
        case closeIdle
        /// The client stopped sending its body or reading its response for the idle timeout
        /// (slow-client attacks): log `client_stalled`, close now.
        case closeStalled
        /// An intercepted client's TLS handshake did not complete within the header timeout:
        /// log it, close now, write nothing (the client expects TLS, not an HTTP `408`).
        case closeStalledHandshake
        case close(Closing)
    }

    /// Whether a parse pass is on the stack: an exchange can finish inside the pass (and ask
    /// for the input to be parsed again), which must loop, not recurse.
    enum ParsePass: Equatable { case idle, running, rerunRequested }

    private(set) var state: State
    private(set) var pass = ParsePass.idle
    let headerTimeout: UInt64
    let idleTimeout: UInt64

    /// A connection accepted at `now`: its first head is due within the header timeout.
    init(now: UInt64, headerTimeout: UInt64, idleTimeout: UInt64) {
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
        state = .readingHead(deadline: now + headerTimeout, peerEnded: false)
    }

    /// True while the connection speaks HTTP (not handshaking, not tunnelling, not closed).
    var isHTTP: Bool {
        switch state {
        case .idle, .readingHead, .exchanging: true
        case .handshaking, .tunnelling, .closed: false
        }
    }

    /// True between the `200` to an intercepted `CONNECT` and the end of the client's TLS
    /// handshake: its input is the handshake's, not HTTP.
    var isHandshaking: Bool {
        if case .handshaking = state { return true }
        return false
    }

    // MARK: Input

    mutating func bytesReadable() -> Action {
        switch state {
        case .idle, .readingHead, .exchanging, .handshaking: .parseInput
        case .tunnelling: .relayReadable
        case .closed: .none
        }
    }

    /// Starts a parse pass; false when one is already running, which then runs once more.
    mutating func beginParsing() -> Bool {
        guard pass == .idle else {
            pass = .rerunRequested
            return false
        }
        pass = .running
        return true
    }

    /// Ends a parse pass; true when another must run (asked for during this one, still HTTP
    /// or handshaking: the ClientHello may have come with the `CONNECT` it follows).
    mutating func parsePassEnded() -> Bool {
        if pass == .rerunRequested && (isHTTP || isHandshaking) {
            pass = .running
            return true
        }
        pass = .idle
        return false
    }

    mutating func headReceived() -> Action {
        switch state {
        case .idle(_, let peerEnded), .readingHead(_, let peerEnded):
            state = .exchanging(pipelinePaused: false, peerEnded: peerEnded)
            return .startExchange
        // The parser yields a head only between messages, and an exchange in flight keeps the
        // next one unparsed until it finishes; a handshaking connection has no parser input.
        case .exchanging, .handshaking, .tunnelling, .closed:
            return .none
        }
    }

    /// The parser needs more bytes. `inputBuffered`: unparsed bytes are waiting in the buffer.
    mutating func needMoreInput(now: UInt64, inputBuffered: Bool) -> Action {
        if case .idle(_, let peerEnded) = state, inputBuffered {
            // The first bytes of the next request: the header clock starts now.
            state = .readingHead(deadline: now + headerTimeout, peerEnded: peerEnded)
        }
        return remainingInputParsed()
    }

    /// After ``Action/parseRemainingInput``: with no request begun, nothing more can come.
    mutating func remainingInputParsed() -> Action {
        switch state {
        case .idle(_, true), .readingHead(_, true):
            state = .closed
            return .close(.afterFlush)
        default:
            return .none
        }
    }

    /// Reported after a parse pass while an exchange runs and input backs up (its body can't
    /// flow yet, or more than the high-water mark is buffered): pipelined requests beyond what
    /// is held stay in the kernel, so a client can't make the proxy buffer without bound.
    mutating func inputBackedUp() -> Action {
        guard case .exchanging(false, let peerEnded) = state else { return .none }
        state = .exchanging(pipelinePaused: true, peerEnded: peerEnded)
        return .pauseReading
    }

    /// The exchange can take request body again. `bodyWanted`: its request is incomplete and
    /// its body not paused.
    mutating func bodyCanFlow(bodyWanted: Bool) -> Action {
        switch state {
        case .exchanging(true, let peerEnded) where bodyWanted:
            state = .exchanging(pipelinePaused: false, peerEnded: peerEnded)
            return .resumeReading
        case .idle, .readingHead, .exchanging:
            return .parseInput
        case .handshaking, .tunnelling, .closed:
            return .none
        }
    }

    /// The exchange answered. `keepAlive`: the exchange allows another request;
    /// `inputBuffered`: pipelined bytes are waiting.
    mutating func exchangeFinished(now: UInt64, keepAlive: Bool, inputBuffered: Bool) -> Action {
        let peerEnded: Bool
        var pipelinePaused = false
        switch state {
        case .idle(_, let ended), .readingHead(_, let ended):
            peerEnded = ended
        case .exchanging(let paused, let ended):
            peerEnded = ended
            pipelinePaused = paused
        case .handshaking, .tunnelling, .closed:
            return .none
        }
        guard keepAlive, !peerEnded || inputBuffered else {
            state = .closed
            return .close(.afterFlush)
        }
        state = .idle(deadline: now + idleTimeout, peerEnded: peerEnded)
        // Resuming reading re-enters parsing for the buffered pipelined bytes.
        if pipelinePaused { return .resumeReading }
        return inputBuffered ? .parseInput : .none
    }

    /// The exchange answered `200` to a `CONNECT` that Outbox terminates: the client's TLS
    /// handshake comes next, due within the header timeout. `inputBuffered`: bytes that came
    /// with the `CONNECT` (the start of the ClientHello) wait in the buffer.
    mutating func interceptedTunnelAccepted(now: UInt64, inputBuffered: Bool) -> Action {
        guard case .exchanging(let paused, let peerEnded) = state else { return .none }
        // A client that has sent EOF can't finish a handshake: it must answer our hello.
        guard !peerEnded else {
            state = .closed
            return .close(.afterFlush)
        }
        state = .handshaking(deadline: now + headerTimeout)
        if paused { return .resumeReading }
        return inputBuffered ? .parseInput : .none
    }

    /// The intercepted client's TLS handshake completed: requests come next, inside TLS, the
    /// first one due within the header timeout as on a newly accepted connection (a client
    /// that shakes hands and then sends nothing holds no more than a silent plain one).
    mutating func handshakeCompleted(now: UInt64) -> Action {
        guard case .handshaking = state else { return .none }
        state = .readingHead(deadline: now + headerTimeout, peerEnded: false)
        return .none
    }

    /// The intercepted client's handshake is refused (its SNI names a host not intercepted;
    /// the shell has queued the TLS alert): send it, then close.
    mutating func handshakeRefused() -> Action {
        guard case .handshaking = state else { return .none }
        state = .closed
        return .close(.afterFlush)
    }

    /// A `CONNECT` exchange is turning the connection into a tunnel.
    mutating func tunnelRequested() -> Action {
        guard case .exchanging = state else { return .none }
        state = .tunnelling
        return .startTunnel
    }

    // MARK: Output

    mutating func outputDrained() -> Action {
        switch state {
        case .exchanging: .resumeResponse
        case .tunnelling: .relayDrained
        case .idle, .readingHead, .handshaking, .closed: .none
        }
    }

    // MARK: Ending

    /// The peer sent EOF (`failed` false) or the read failed. `requestComplete`: the exchange
    /// in flight, if any, has its whole request.
    mutating func peerClosed(failed: Bool, requestComplete: Bool) -> Action {
        switch state {
        case .tunnelling:
            return .relayEnded
        case .closed:
            return .none
        case .handshaking:
            // Mid-handshake, nothing more can come that would complete it; whatever is queued
            // (the `200`, our handshake records, an alert) is TLS or precedes it.
            if failed { return closeNow() }
            state = .closed
            return .close(.afterFlush)
        case .idle(let deadline, _):
            if failed { return closeNow() }
            state = .idle(deadline: deadline, peerEnded: true)
            return .parseRemainingInput
        case .readingHead(let deadline, _):
            if failed { return closeNow() }
            state = .readingHead(deadline: deadline, peerEnded: true)
            return .parseRemainingInput
        case .exchanging(let paused, _):
            // Half a request can't be forwarded meaningfully.
            if failed || !requestComplete { return closeNow() }
            state = .exchanging(pipelinePaused: paused, peerEnded: true)
            return .none
        }
    }

    /// The request can't be parsed. `responseStarted`: the exchange's response head is out,
    /// so it can't become an error response.
    mutating func requestMalformed(responseStarted: Bool) -> Action {
        guard isHTTP else { return .none }
        if responseStarted { return closeNow() }
        state = .closed
        return .answerErrorAndClose
    }

    /// The exchange's response can't be completed: send what is queued, then close.
    mutating func responseAborted() -> Action {
        guard state != .closed else { return .none }
        state = .closed
        return .close(.afterFlush)
    }

    /// Connecting the tunnel failed before any byte was relayed: answer the error, close.
    mutating func tunnelFailed() -> Action {
        guard state == .tunnelling else { return .none }
        state = .closed
        return .answerErrorAndClose
    }

    /// Both directions of the tunnel are done: send what is queued, then close.
    mutating func tunnelEnded() -> Action {
        guard state == .tunnelling else { return .none }
        state = .closed
        return .close(.afterFlush)
    }

    /// A write failed or the grace period of a shutdown ended. Always answered with a close,
    /// even when already closed: a connection closing after flush whose peer hung up must
    /// still release its socket.
    mutating func abandon() -> Action {
        closeNow()
    }

    /// Shutdown began: a connection with no request in progress closes now; a busy one
    /// closes after its current response. `inputPending`: part of a request is buffered or
    /// parsed.
    mutating func shutdownBegan(inputPending: Bool) -> Action {
        switch state {
        case .idle, .readingHead:
            if inputPending { return .none }
            state = .closed
            return .closeIdle
        case .handshaking:
            // No request has begun: a handshake is no work to finish.
            state = .closed
            return .closeIdle
        case .exchanging, .tunnelling, .closed:
            return .none
        }
    }

    // MARK: Timeouts

    /// The loop's timer swept at `now`. `inputPending`: part of a request is buffered or
    /// parsed; `awaitingRequestBody`: the exchange wants body bytes the client hasn't sent;
    /// `responseUnread`: response bytes wait for the client to read them; `lastProgress`:
    /// when a byte last moved either way.
    mutating func tick(now: UInt64, inputPending: Bool, awaitingRequestBody: Bool, responseUnread: Bool,
                       lastProgress: UInt64) -> Action {
        switch state {
        case .exchanging:
            // A client that stops sending its body, or stops reading its response, must not
            // hold a connection and an upstream exchange forever.
            guard awaitingRequestBody || responseUnread, now &- lastProgress > idleTimeout else { return .none }
            state = .closed
            return .closeStalled
        case .readingHead(let deadline, _):
            guard now >= deadline else { return .none }
            state = .closed
            // A connection that never sent a byte gets no answer, just the close.
            return inputPending ? .answer408AndClose : .closeIdle
        case .idle(let deadline, _):
            guard now >= deadline else { return .none }
            state = .closed
            return .closeIdle
        case .handshaking(let deadline):
            guard now >= deadline else { return .none }
            state = .closed
            return .closeStalledHandshake
        case .tunnelling, .closed:
            return .none
        }
    }

    private mutating func closeNow() -> Action {
        state = .closed
        return .close(.immediately)
    }
}

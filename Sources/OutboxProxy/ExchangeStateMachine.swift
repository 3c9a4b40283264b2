import OutboxHTTP

/// The lifecycle of one proxied exchange as a value: events in, actions out, no I/O.
///
/// ``ProxyExchange`` owns the buffers, the upstream call and the client's stream; it reports
/// what happened (the request's body and end, the upstream's head, body, end or failure, the
/// client's output draining, an abort) and carries out the ``Action`` it gets back. The
/// machine decides when 100 Continue goes out, when a failed call is sent again, when a
/// queueable request is stored instead, how the response is framed to the client and how the
/// exchange ends. Invariant: once `finished`, every event is ignored.
struct ExchangeStateMachine {
    /// How far the client's request has come.
    enum RequestSide: Equatable {
        /// The client asked for 100 Continue and waits for it before sending its body.
        case expectingContinue
        /// Body bytes may still arrive.
        case streaming
        /// The whole request is in.
        case complete
    }

    /// Who reads the whole body before anything is decided.
    enum Reader: Equatable, Sendable { case queue, admin }

    /// The call to the origin.
    enum UpstreamSide: Equatable {
        case noCall
        case started
        /// Sent once more after a stale pooled connection failed: never again.
        case retried
    }

    /// The response as relayed to the client.
    struct ResponseSide: Equatable {
        /// Re-encoded as chunked (an HTTP/1.1 client, a chunked or close-delimited origin body).
        var chunkedToClient: Bool
        var hasBody: Bool
        /// Whether the client's connection outlives this response.
        var keepAlive: Bool
    }

    enum State: Equatable {
        /// Routing and the queue's rules run, or the pool looks the origin up.
        case preparing(RequestSide, UpstreamSide)
        /// The whole body is read before anything is decided.
        case buffering(RequestSide, for: Reader)
        /// Waiting for the queue's fdatasync (or the admin API) before answering.
        case storing
        /// A call is out and no response head has come back.
        case forwarding(RequestSide, UpstreamSide)
        /// The response head is relayed; the body follows.
        case responding(RequestSide, ResponseSide)
        /// A local answer's head is out and its body is written as the client takes it (the
        /// admin API's streamed operation view); the request is complete.
        case answering
        /// The response is complete but the client still sends its body (the origin answered
        /// early): the rest is read and dropped so the connection stays in sync.
        case draining(keepAlive: Bool)
        case finished
    }

    /// What the shell does in answer to an event.
    enum Action: Equatable {
        case none
        /// Write `HTTP/1.1 100 Continue`.
        case sendContinue
        /// The whole request is in: tell the upstream call the body has ended.
        case finishUpstreamBody
        /// Keep the body bytes for the queue or the admin API; nothing goes upstream yet.
        case bufferBody
        /// Pass the body bytes to the call (keeping the copy that a resend needs).
        case forwardBody
        /// The whole body is buffered: run the queue's rules, or the admin API.
        case decide(Reader)
        /// Send the request again on a fresh connection.
        case resendOnNewConnection
        /// The origin is unreachable and the request queueable: store it and answer 202.
        case storeInstead
        /// Write the response head, `Transfer-Encoding: chunked` added when `chunked`.
        case relayHead(chunked: Bool)
        case relayBody(chunked: Bool)
        case resumeResponse
        /// The response ended (`lastChunk`: write the chunked terminator); the exchange is done.
        case finishResponse(lastChunk: Bool, keepAlive: Bool)
        /// The response ended before the request body did: drop the rest of it.
        case drainRequest(lastChunk: Bool)
        /// The drained request ended: the exchange is done.
        case finish(keepAlive: Bool)
        /// Answer the upstream's failure with an error status.
        case fail
        /// The upstream failed after the response head went out: close after flush.
        case cut
        /// The client is gone: cancel the call.
        case cancelCall
    }

    private(set) var state: State
    /// The request may be stored by the queue (its method is in `queue.methods`).
    private(set) var queueable = false
    private let isHead: Bool
    private let clientSpeaksHTTP11: Bool

    init(requestComplete: Bool, isHead: Bool, clientSpeaksHTTP11: Bool) {
        state = .preparing(requestComplete ? .complete : .streaming, .noCall)
        self.isHead = isHead
        self.clientSpeaksHTTP11 = clientSpeaksHTTP11
    }

    // MARK: Queries

    var requestComplete: Bool {
        switch state {
        case .preparing(let request, _), .buffering(let request, _), .forwarding(let request, _),
             .responding(let request, _):
            request == .complete
        case .storing, .answering: true
        case .draining: false
        case .finished: true
        }
    }

    /// The response head is out.
    var responseStarted: Bool {
        switch state {
        case .responding, .answering: true
        default: false
        }
    }

    var isPreparing: Bool {
        if case .preparing = state { return true }
        return false
    }

    var isStoring: Bool { state == .storing }

    /// The whole body is in and `reader` is deciding what to do with it (a store's answer may
    /// come later, on another turn of the loop).
    func isDeciding(for reader: Reader) -> Bool {
        state == .buffering(.complete, for: reader)
    }

    /// Whether request body bytes may be read from the client.
    enum BodyGate: Equatable {
        case open
        case closed
        /// Open while the upstream call can take body.
        case upstream
    }

    var bodyGate: BodyGate {
        switch state {
        case .preparing(let request, _): request == .complete ? .open : .closed
        case .forwarding(let request, _), .responding(let request, _): request == .complete ? .open : .upstream
        case .buffering, .storing, .answering, .draining, .finished: .open
        }
    }

    // MARK: Request side

    /// The head asked for 100 Continue: sent when the body is first wanted, and only to an
    /// HTTP/1.1 client whose request has a body.
    mutating func headParsed(expectsContinue: Bool) {
        guard expectsContinue, clientSpeaksHTTP11, case .preparing(.streaming, let upstream) = state else { return }
        state = .preparing(.expectingContinue, upstream)
    }

    /// The body is read whole before the queue's rules or the admin API run.
    mutating func readWholeBody(for reader: Reader) -> Action {
        guard case .preparing(let request, _) = state else { return .none }
        if reader == .queue { queueable = true }
        switch request {
        case .complete:
            state = .buffering(.complete, for: reader)
            return .decide(reader)
        case .expectingContinue:
            // The admin API too: curl waits a second for the 100 before it sends a body anyway.
            state = .buffering(.streaming, for: reader)
            return .sendContinue
        case .streaming:
            state = .buffering(request, for: reader)
            return .none
        }
    }

    mutating func requestBody() -> Action {
        switch state {
        case .buffering: .bufferBody
        case .preparing, .storing, .forwarding, .responding: .forwardBody
        case .answering, .draining, .finished: .none
        }
    }

    mutating func requestEnded() -> Action {
        switch state {
        case .preparing(_, let upstream):
            state = .preparing(.complete, upstream)
            return .none
        case .buffering(_, let reader):
            state = .buffering(.complete, for: reader)
            return .decide(reader)
        case .forwarding(_, let upstream):
            state = .forwarding(.complete, upstream)
            return .finishUpstreamBody
        case .responding(_, let response):
            state = .responding(.complete, response)
            return .finishUpstreamBody
        case .draining(let keepAlive):
            state = .finished
            return .finish(keepAlive: keepAlive)
        case .storing, .answering, .finished:
            return .none
        }
    }

    /// The client went away or broke the protocol.
    mutating func abort() -> Action {
        guard state != .finished else { return .none }
        state = .finished
        return .cancelCall
    }

    // MARK: Upstream side

    /// The pool must look the origin up before the call can start.
    mutating func awaitConnection() {
        switch state {
        case .preparing: break
        case .buffering(let request, _), .forwarding(let request, _): state = .preparing(request, .noCall)
        case .storing, .answering, .responding, .draining, .finished: break
        }
    }

    /// The call is starting. Answers what the request side needs once it is out.
    mutating func callStarted() -> Action {
        let request: RequestSide
        var upstream = UpstreamSide.started
        switch state {
        case .preparing(let side, let attempt):
            request = side
            if attempt == .retried { upstream = .retried }
        case .buffering(let side, _):
            request = side
        case .forwarding(let side, let attempt):
            request = side
            upstream = attempt
        case .storing, .answering, .responding, .draining, .finished:
            return .none
        }
        switch request {
        case .complete:
            state = .forwarding(.complete, upstream)
            return .finishUpstreamBody
        case .expectingContinue:
            state = .forwarding(.streaming, upstream)
            return .sendContinue
        case .streaming:
            state = .forwarding(.streaming, upstream)
            return .none
        }
    }

    /// The origin's response head. `unavailable`: its status is one that means "unreachable";
    /// `keepAlive`: the client's connection outlives a relayed response.
    mutating func upstreamHead(status: Int, framing: HTTPBodyFraming, unavailable: Bool, keepAlive: Bool) -> Action {
        guard case .forwarding(let request, _) = state else { return .none }
        if unavailable && queueable {
            state = .storing
            return .storeInstead
        }
        // HEAD responses and 1xx/204/304 end at the blank line whatever their headers say.
        let hasBody = framing != .none && !isHead && status >= 200 && status != 204 && status != 304
        // An HTTP/1.0 client knows no chunked coding: there the end of the body is the close.
        let chunked = hasBody && clientSpeaksHTTP11 && (framing == .chunked || framing == .untilClose)
        state = .responding(request, ResponseSide(chunkedToClient: chunked, hasBody: hasBody, keepAlive: keepAlive))
        return .relayHead(chunked: chunked)
    }

    mutating func upstreamBody() -> Action {
        guard case .responding(_, let response) = state, response.hasBody else { return .none }
        return .relayBody(chunked: response.chunkedToClient)
    }

    mutating func upstreamEnded() -> Action {
        guard case .responding(let request, let response) = state else { return .none }
        let lastChunk = response.chunkedToClient
        if request != .complete {
            state = .draining(keepAlive: response.keepAlive)
            return .drainRequest(lastChunk: lastChunk)
        }
        state = .finished
        return .finishResponse(lastChunk: lastChunk, keepAlive: response.keepAlive)
    }

    /// The call failed. `retryable`: before any response byte, on a pooled connection the
    /// origin had closed; `unreachable`: the origin could not be reached at all;
    /// `replayable`: safe to send twice (an idempotent method or an idempotency key; a queueable
    /// request always carries one upstream); `bodyCopyWhole`: every body byte so far is kept, so
    /// the request can be sent again. After `fail` the shell answers and calls ``end()``.
    mutating func upstreamFailed(retryable: Bool, replayable: Bool, unreachable: Bool, bodyCopyWhole: Bool) -> Action {
        let request: RequestSide
        let attempt: UpstreamSide
        switch state {
        case .responding:
            // Too late for an error status: the head is out; closing tells the client the body is short.
            state = .finished
            return .cut
        case .preparing(let side, let upstream), .forwarding(let side, let upstream):
            request = side
            attempt = upstream
        case .buffering(let side, _):
            request = side
            attempt = .noCall
        case .storing, .answering, .draining, .finished:
            return .none
        }
        // Only what is safe to repeat is sent again, and only once (Go's transport has the same rule).
        if retryable, attempt != .retried, bodyCopyWhole, replayable || queueable {
            state = .preparing(request, .retried)
            return .resendOnNewConnection
        }
        if unreachable && queueable {
            state = .storing
            return .storeInstead
        }
        return .fail
    }

    /// The client's output drained.
    func clientDrained() -> Action {
        responseStarted ? .resumeResponse : .none
    }

    // MARK: Ending

    /// The exchange waits for the queue or the admin API before it answers.
    mutating func beginStoring() {
        guard state != .finished else { return }
        state = .storing
    }

    /// The admin API's answer is streamed: its head is out, its body follows as the client's
    /// output drains.
    mutating func beginAnswering() {
        guard state == .storing else { return }
        state = .answering
    }

    /// The exchange answered locally (an error, a 202, the admin API) or became a tunnel.
    mutating func end() {
        state = .finished
    }
}

import OutboxFaults
import OutboxHTTP
import OutboxModel
import OutboxNet

/// The one place where Outbox sends a request upstream, for direct forwards and replay attempts
/// alike (one instance of each per loop): asks the fault rules first, and either passes the call
/// to the loop's pool or stands in for the failure a rule names. A stand-in reports through the
/// same handler callbacks a real connection would, so everything after it — marking the origin
/// offline, storing a queueable request, the replay outcome table — is the code that handles
/// real failures.
final class FaultInjectingTransport: UpstreamTransport {
    private let base: UpstreamTransport
    private let kind: UpstreamRequestKind
    private let faults: FaultBook
    private let loop: EventLoop
    private let responseTimeout: Double

    init(base: UpstreamTransport, kind: UpstreamRequestKind, faults: FaultBook, loop: EventLoop, responseTimeout: Double) {
        self.base = base
        self.kind = kind
        self.faults = faults
        self.loop = loop
        self.responseTimeout = responseTimeout
    }

    func startCall(to origin: Origin, head: HTTPRequestHead, bodyFraming: HTTPBodyFraming,
                   handler: UpstreamResponseHandler) -> UpstreamCall {
        guard let action = faults.decide(origin: origin, method: head.method, target: head.target, kind: kind) else {
            return base.startCall(to: origin, head: head, bodyFraming: bodyFraming, handler: handler)
        }
        let call = InjectedFault(action: action, origin: origin, head: head, bodyFraming: bodyFraming, handler: handler,
                                 base: base, loop: loop, responseTimeout: responseTimeout)
        call.begin()
        return call
    }
}

/// One request answered by a fault rule. Its callbacks run on a later loop turn or sweep, never
/// inside `startCall`: the caller has not stored the call yet.
private final class InjectedFault: UpstreamCall, DeadlineTracked {
    private enum Phase {
        /// `status`/`reset`: the request body is still coming; answer once it is complete.
        case awaitingBody
        /// `timeout`/`latency`: until the deadline.
        case waiting(deadline: UInt64)
        /// `latency` over: the real call carries on.
        case forwarded(UpstreamCall)
        case done
    }

    private let action: FaultRule.Action
    private let origin: Origin
    private let head: HTTPRequestHead
    private let bodyFraming: HTTPBodyFraming
    /// Held until the call ends, as a connection holds its handler.
    private var handler: UpstreamResponseHandler?
    private let base: UpstreamTransport
    private let loop: EventLoop
    private let responseTimeout: Double
    private var phase = Phase.awaitingBody
    /// `latency` only: the body and trailers received while waiting, sent once the call starts.
    private var heldBody: [UInt8] = []
    private var heldTrailers: HTTPHeaders?
    private var responsePaused = false

    init(action: FaultRule.Action, origin: Origin, head: HTTPRequestHead, bodyFraming: HTTPBodyFraming,
         handler: UpstreamResponseHandler, base: UpstreamTransport, loop: EventLoop, responseTimeout: Double) {
        self.action = action
        self.origin = origin
        self.head = head
        self.bodyFraming = bodyFraming
        self.handler = handler
        self.base = base
        self.loop = loop
        self.responseTimeout = responseTimeout
    }

    func begin() {
        switch action {
        case .offline:
            // Refused before anything is sent: the caller may store the request.
            later { $0.fail(.connectFailed("connection refused (fault)")) }
        case .timeout:
            wait(seconds: responseTimeout)
        case .latency(let seconds):
            wait(seconds: seconds)
        case .status, .reset:
            if bodyFraming == .none || bodyFraming == .contentLength(0) { later { $0.answer() } }
        }
    }

    private func wait(seconds: Double) {
        phase = .waiting(deadline: loop.now + UInt64(max(0, seconds) * 1e9))
        loop.track(self)
    }

    private func later(_ step: @escaping (InjectedFault) -> Void) {
        let bound = LoopBound(value: (self, step), loop: loop)
        loop.execute { bound.value.1(bound.value.0) }
    }

    var canAcceptBody: Bool {
        if case .forwarded(let call) = phase { return call.canAcceptBody }
        return true
    }

    func sendBody(_ bytes: UnsafeRawBufferPointer) {
        switch phase {
        case .forwarded(let call): call.sendBody(bytes)
        case .waiting where isLatency: heldBody.append(contentsOf: bytes)
        default: break
        }
    }

    func finishBody(trailers: HTTPHeaders) {
        switch phase {
        case .forwarded(let call): call.finishBody(trailers: trailers)
        case .waiting where isLatency: heldTrailers = trailers
        case .awaitingBody: later { $0.answer() }
        default: break
        }
    }

    func pauseResponse() {
        if case .forwarded(let call) = phase { call.pauseResponse() } else { responsePaused = true }
    }

    func resumeResponse() {
        if case .forwarded(let call) = phase { call.resumeResponse() } else { responsePaused = false }
    }

    func cancel() {
        if case .forwarded(let call) = phase { call.cancel() }
        end()
    }

    func checkDeadlines(now: UInt64) {
        guard case .waiting(let deadline) = phase, now >= deadline else { return }
        loop.untrack(self)
        guard isLatency else {
            fail(.responseTimeout)
            return
        }
        guard let handler else { return end() }
        let call = base.startCall(to: origin, head: head, bodyFraming: bodyFraming, handler: handler)
        phase = .forwarded(call)
        if !heldBody.isEmpty { heldBody.withUnsafeBytes { call.sendBody($0) } }
        heldBody = []
        if let heldTrailers { call.finishBody(trailers: heldTrailers) }
        if responsePaused { call.pauseResponse() }
    }

    private var isLatency: Bool {
        if case .latency = action { return true }
        return false
    }

    /// The rule's answer: a response as the origin would have sent it, or a dropped connection.
    private func answer() {
        guard case .awaitingBody = phase else { return }
        switch action {
        case .status(let status, let retryAfter, let body):
            guard let handler else { return end() }
            end()
            handler.upstreamReceivedHead(FaultAnswer.head(status: status, retryAfterSeconds: retryAfter, body: body),
                                         framing: .contentLength(body.count))
            if !body.isEmpty { body.withUnsafeBytes { handler.upstreamReceivedBody($0) } }
            handler.upstreamFinished(trailers: HTTPHeaders())
            handler.upstreamProcessedInput()
        case .reset:
            fail(.noResponse("connection reset by peer (fault)", retryable: false))
        default:
            break
        }
    }

    private func fail(_ error: UpstreamError) {
        if case .done = phase { return }
        let handler = self.handler
        end()
        handler?.upstreamFailed(error)
        handler?.upstreamProcessedInput()
    }

    private func end() {
        if case .waiting = phase { loop.untrack(self) }
        handler = nil
        phase = .done
    }
}

/// The response head of a `status` rule: as an origin would send it, framed by length, typed
/// JSON when the body looks like JSON, with `Retry-After` in whole seconds (RFC 9110 §10.2.3).
enum FaultAnswer {
    static func head(status: Int, retryAfterSeconds retryAfter: Double?, body: [UInt8]) -> HTTPResponseHead {
        var headers = HTTPHeaders()
        if !body.isEmpty {
            let json = body.first { $0 != UInt8(ascii: " ") }.map { $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: "[") } ?? false
            headers.add("Content-Type", json ? "application/json" : "text/plain; charset=utf-8")
        }
        headers.add("Content-Length", String(body.count))
        if let retryAfter { headers.add("Retry-After", String(Int(retryAfter.rounded(.up)))) }
        return HTTPResponseHead(status: status, headers: headers)
    }
}

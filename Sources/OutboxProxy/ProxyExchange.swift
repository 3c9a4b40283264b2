import Foundation
import OutboxHTTP
import OutboxModel
import OutboxNet
import OutboxQueue

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
    /// `buffering`: a queueable request's body is read whole before anything is decided;
    /// `storing`: waiting for the queue's fdatasync before answering 202.
    enum Phase { case preparing, buffering, storing, forwarding, responding, draining, finished }

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
    /// Set for a request the queue may store (method in `queue.methods`).
    private var queueable = false
    private var target = ""
    private var control = ControlHeaders()
    private var idempotencyKey = ""
    private var fingerprint: [UInt8] = []
    /// Set for a request to the admin API: the path below `admin.pathPrefix`.
    private var adminPath: String?

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
        guard !requestComplete, phase != .draining, phase != .buffering else { return false }
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
        switch client.context.adminRoute(for: head.target, on: client.listener) {
        case .admin(let path):
            if let refusal = client.context.admin?.refusal(for: head, peerIsLoopback: client.peerIsLoopback) {
                answerAdmin(refusal, pretty: AdminRequest.rendersPretty(head, query: AdminRequest.split(path).1))
                return
            }
            adminPath = path
            phase = .buffering
            if requestComplete { runAdmin() }
            return
        case .notOnAdminListener:
            answerAdmin(AdminResponse.error(404, "not_found",
                                            "this listener serves only the admin API, under \(client.context.adminPrefix)"),
                        pretty: false)
            return
        case .proxy:
            break
        }
        switch ProxyRules.route(head, upstream: client.context.upstream, forwardProxy: client.context.forwardProxy) {
        case .failure(let error):
            fail(error)
        case .success(.tunnel(let host, let port)):
            phase = .finished
            client.startTunnel(host: host, port: port)
        case .success(.origin(let origin, let target, _)):
            self.origin = origin
            self.target = target
            if let queue = client.context.queue {
                do {
                    control = try ControlHeaders(parsing: head.headers)
                } catch {
                    fail(.badRequest(error.message))
                    return
                }
                if client.context.queueMethods.contains(head.method) {
                    queueable = true
                    phase = .buffering
                    if sendContinue {
                        sendContinue = false
                        client.stream.enqueue(Self.continueBytes)
                        client.stream.flushSoon()
                    }
                    if requestComplete { decideQueueable(queue) }
                    return
                }
                if queue.forcedOffline || !queue.isOnline(origin) {
                    fail(.unavailable("upstream \(origin) is offline; only \(client.context.queueMethodList) requests are queued"))
                    return
                }
            }
            upstreamHead = ProxyRules.upstreamRequestHead(head, origin: origin, target: target,
                                                          clientAddress: client.peerText, bodyFraming: requestFraming)
            startForwarding()
        }
    }

    private func beginCall() {
        guard let origin, let upstreamHead, let transport else { return }
        phase = .forwarding
        let framing = requestFramingOverride ?? requestFraming
        let call = transport.startCall(to: origin, head: upstreamHead, bodyFraming: framing, handler: self)
        self.call = call
        if !bodyCopy.isEmpty {
            bodyCopy.withUnsafeBytes { call.sendBody($0) }
        }
        if requestComplete {
            if framing != .none && framing != .contentLength(0) {
                call.finishBody(trailers: bodyTrailers ?? HTTPHeaders())
            }
        } else if sendContinue {
            sendContinue = false
            client.stream.enqueue(Self.continueBytes)
            client.stream.flushSoon()
        }
        // A queueable request keeps its whole body: a failed attempt turns into a stored one.
        if !queueable && (bodyCopy.count > Self.maxReplayableBody || !bodyCopyValid) {
            bodyCopy = []
            bodyCopyValid = false
        }
        client.resumeBody()
    }

    private static let continueBytes = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    func requestBody(_ bytes: UnsafeRawBufferPointer) {
        guard phase != .finished, phase != .draining else { return }
        if phase == .buffering {
            // Bounded by queue.maxBodyBytes: the parser stops a longer body with 413.
            bodyCopy.append(contentsOf: bytes)
            return
        }
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
        if phase == .buffering, adminPath != nil {
            runAdmin()
            return
        }
        if phase == .buffering, let queue = client.context.queue {
            decideQueueable(queue)
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
        if let queue = client.context.queue, let origin {
            if client.context.unavailableStatuses.contains(upstream.status) {
                queue.originUnreachable(origin, reason: "HTTP \(upstream.status)")
                if queueable {
                    // An unavailable status means "unreachable": store instead of relaying.
                    call?.cancel()
                    call = nil
                    store(queue)
                    return
                }
            } else {
                queue.originAnswered(origin)
            }
        }
        phase = .responding
        responseStatus = upstream.status
        var response = ProxyRules.clientResponseHead(upstream, bodyFraming: framing)
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
        guard phase == .forwarding || phase == .preparing || phase == .responding || phase == .buffering else { return }
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
        if let queue = client.context.queue, let origin, error.meansUnreachable {
            queue.originUnreachable(origin, reason: error.summary)
            if queueable {
                store(queue)
                return
            }
        }
        fail(.upstream(error))
    }

    /// Idempotent methods (RFC 9110 §9.2.2) and requests carrying an idempotency key may be
    /// sent twice; anything else might act twice at the origin.
    private var isReplayable: Bool {
        if queueable { return true }  // it carries an idempotency key upstream
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

    // MARK: Queueable requests

    /// The whole request is here: answer from the idempotency record, store it, or forward it.
    private func decideQueueable(_ queue: QueueGateway) {
        guard let origin else { return }
        let headerName = client.context.idempotencyHeader
        switch head.headers.count(of: headerName) {
        case 0:
            idempotencyKey = UUIDText.lowercase(UUID())
        case 1:
            idempotencyKey = head.headers.first(headerName) ?? ""
            guard IdempotencyKey.isValid(idempotencyKey) else {
                fail(.badRequest("\(headerName) must be 1 to 255 visible ASCII characters"))
                return
            }
        default:
            fail(.badRequest("several \(headerName) headers"))
            return
        }
        let known: OperationSnapshot?
        do {
            known = try queue.operation(withKey: idempotencyKey)
        } catch {
            // The key is taken but its operation unreadable: storing or forwarding again could
            // deliver it twice.
            fail(.insufficientStorage("\(error)"))
            return
        }
        if let existing = known {
            fingerprint = IdempotencyKey.fingerprint(method: head.method, target: target, body: bodyCopy)
            guard existing.fingerprint == fingerprint else {
                fail(.keyReused(headerName))
                return
            }
            if existing.state.status == .completed, let stored = existing.state.response {
                answerReplayed(stored, id: existing.id)
            } else {
                answerAccepted(existing)
            }
            return
        }
        var upstream = ProxyRules.upstreamRequestHead(head, origin: origin, target: target,
                                                      clientAddress: client.peerText, bodyFraming: .contentLength(bodyCopy.count))
        // Stored and replayed requests are framed by length; the key goes upstream on direct
        // forwards too, so a retry by the client is recognised by the origin. Headers
        // the client sent keep their place.
        if requestFraming != .contentLength(bodyCopy.count) {
            upstream.headers.removeAll("Transfer-Encoding")
            upstream.headers.replaceOrAdd("Content-Length", String(bodyCopy.count))
        }
        if !upstream.headers.contains(headerName) { upstream.headers.add(headerName, idempotencyKey) }
        upstreamHead = upstream
        requestFramingOverride = .contentLength(bodyCopy.count)
        if queue.forcedOffline || control.forceQueue || !queue.isOnline(origin) || queue.hasQueued(origin) {
            store(queue)
            return
        }
        startForwarding()
    }

    private var requestFramingOverride: HTTPBodyFraming?

    /// Picks the transport and begins the call, after a name lookup when one is needed.
    private func startForwarding() {
        guard let origin else { return }
        if origin.scheme == .https {
            transport = client.context.secureTransport.transport(for: client.loop)
            beginCall()
            return
        }
        let pool = client.loopState.pool
        transport = pool
        if pool.isReady(origin) {
            beginCall()
        } else {
            phase = .preparing
            pool.prepare(origin) { [weak self] result in
                guard let self, self.phase == .preparing else { return }
                switch result {
                case .success: self.beginCall()
                case .failure(let error): self.upstreamFailed(error)
                }
            }
        }
    }

    private func store(_ queue: QueueGateway) {
        guard let origin, let upstreamHead else { return }
        var dependsOn: UUID?
        if let reference = control.dependsOn {
            guard let resolved = queue.resolveDependency(reference) else {
                fail(.badRequest("Outbox-Depends-On: no operation with id or key \(reference)"))
                return
            }
            dependsOn = resolved
        }
        phase = .storing
        // Only a stored operation needs its fingerprint; a direct forward never computes it.
        if fingerprint.isEmpty { fingerprint = IdempotencyKey.fingerprint(method: head.method, target: target, body: bodyCopy) }
        let request = OperationRequest(
            id: UUID(), origin: origin, method: head.method, target: upstreamHead.target,
            headers: upstreamHead.headers, body: bodyCopy, idempotencyKey: idempotencyKey,
            fingerprint: fingerprint, priority: control.priority, tag: control.tag, dependsOn: dependsOn,
            createdAt: WallClock.millis())
        let bound = LoopBound(value: self, loop: client.loop)
        queue.enqueue(request) { result in
            bound.loop.execute { bound.value.storeFinished(result) }
        }
    }

    private func storeFinished(_ result: Result<OperationSnapshot, EnqueueError>) {
        // The client may have gone meanwhile: the operation is stored all the same.
        guard phase == .storing else { return }
        switch result {
        case .success(let info): answerAccepted(info)
        case .failure(.keyConflict): fail(.keyReused(client.context.idempotencyHeader))
        case .failure(.full(let reason)), .failure(.storage(let reason)): fail(.insufficientStorage(reason))
        }
    }

    /// `202 Accepted` with the operation's id and key, sent only once the operation is on disk.
    private func answerAccepted(_ info: OperationSnapshot) {
        let id = UUIDText.lowercase(info.id)
        let body = JSON.object([
            ("id", .string(id)), ("status", .string(info.state.status.rawValue)),
            ("idempotencyKey", .string(info.idempotencyKey)), ("queuedAt", .string(WallClock.iso8601(millis: info.createdAt))),
        ]).rendered() + "\n"
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        headers.add("Content-Length", String(body.utf8.count))
        headers.add("Location", client.context.operationLocationBase + id)
        headers.add("Outbox-Operation-Id", id)
        headers.add(client.context.idempotencyHeader, info.idempotencyKey)
        answer(HTTPResponseHead(status: 202, headers: headers), body: Array(body.utf8))
    }

    /// A completed operation's stored response, for a client repeating its key.
    private func answerReplayed(_ stored: StoredResponse, id: UUID) {
        var headers = stored.headers
        headers.removeAll("Content-Length")
        headers.removeAll("Transfer-Encoding")
        headers.add("Content-Length", String(stored.body.count))
        headers.add("Outbox-Operation-Id", UUIDText.lowercase(id))
        headers.add("Idempotent-Replayed", "true")
        answer(HTTPResponseHead(status: stored.status, headers: headers), body: stored.body)
    }

    private func answer(_ response: HTTPResponseHead, body: [UInt8]) {
        var response = response
        if client.isDraining { keepAlive = false }
        if !keepAlive { response.headers.add("Connection", "close") }
        else if head.version == .http1_0 { response.headers.add("Connection", "keep-alive") }
        client.stream.withOutput { HTTPSerializer.writeResponseHead(response, into: &$0) }
        if head.method != "HEAD" { client.stream.enqueue(body) }
        responseBytes = body.count
        finish(status: response.status)
    }

    // MARK: Admin API

    private func runAdmin() {
        guard let admin = client.context.admin, let adminPath else { return }
        phase = .storing
        let (path, query) = AdminRequest.split(adminPath)
        let request = AdminRequest(method: head.method, path: path, query: query, body: bodyCopy,
                                   pretty: AdminRequest.rendersPretty(head, query: query))
        let bound = LoopBound(value: self, loop: client.loop)
        Task {
            let response = await admin.handle(request)
            bound.loop.execute {
                guard bound.value.phase == .storing else { return }
                bound.value.answerAdmin(response, pretty: request.pretty)
            }
        }
    }

    private func answerAdmin(_ response: AdminResponse, pretty: Bool) {
        // 204 carries no body at all (RFC 9110 §15.3.5).
        let text = response.raw?.text ?? response.body.rendered(pretty: pretty) + "\n"
        let body = response.status == 204 ? [] : Array(text.utf8)
        var headers = HTTPHeaders()
        if response.status != 204 {
            headers.add("Content-Type", response.raw?.contentType ?? "application/json")
            headers.add("Content-Length", String(body.count))
        }
        headers.add("Cache-Control", "no-store")
        for (name, value) in response.extraHeaders { headers.add(name, value) }
        if !requestComplete { keepAlive = false }
        answer(HTTPResponseHead(status: response.status, headers: headers), body: body)
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
        client.loopState.metrics.request(nanoseconds: client.loop.now &- started,
                                         forwardedStatus: responseStatus == 0 ? nil : responseStatus)
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

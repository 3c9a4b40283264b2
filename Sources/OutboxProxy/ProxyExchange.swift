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
///
/// The lifecycle's decisions are ``ExchangeStateMachine``'s; this class holds the I/O (the
/// buffers, the upstream call, the client's stream) and carries out the machine's actions.
final class ProxyExchange: UpstreamResponseHandler {
    /// Strong: the client drops its exchange on every ending path, which breaks the cycle.
    let client: ClientConnection
    /// The parsed request; its fields go back to the client's parser when the exchange ends.
    private(set) var head: HTTPRequestHead
    let requestFraming: HTTPBodyFraming
    private let started: UInt64
    private var machine: ExchangeStateMachine
    private var origin: Origin?
    private var upstreamHead: HTTPRequestHead?
    private var call: UpstreamCall?
    private var transport: UpstreamTransport?
    /// Body bytes seen before the call exists, a queueable request's whole body (it may still
    /// be stored, and the forward is sent from here), or the copy kept to resend on a stale
    /// pooled connection: in memory within `limits.bodyMemoryBytes`, else in a spill file.
    private var body: RequestBodyBuffer
    /// `body`'s bytes went into a stored operation or an admin request: they are theirs now.
    private var bodyHandedOn = false
    /// Whether `body` still holds every body byte so far, so the request can be sent again
    /// (it stops once the body outgrows `maxReplayableBody` after the call has started).
    private var bodyCopyIsResendable = true
    /// Bytes of `body` the current call has taken. Kept bytes reach the call in pieces, as it
    /// takes them (its output stays under the socket's high-water mark): a stored body is
    /// never copied whole into an output queue.
    private var bodySent = 0
    /// The request is complete: the call's body ends once `body` is all sent.
    private var upstreamBodyEndPending = false
    /// When the call last took body bytes (loop time, ns): one that stops taking them for
    /// `reachability.responseTimeoutSeconds` has not answered in time.
    private var bodyProgressAt: UInt64 = 0
    /// `pumpBody` is running: a call-back inside it asks for another round instead.
    private var pumping = false
    private var pumpAgain = false
    private var bodyTrailers: HTTPHeaders?
    private var responseStatus = 0
    private var responseBytes = 0
    private var target = ""
    private var control = ControlHeaders()
    /// The client's idempotency key; see `generatedKey` for a request that came without one.
    private var idempotencyKey = ""
    /// The key made up for a request without one: kept as a UUID, so a direct forward writes
    /// its text straight into the upstream head and never makes a String of it.
    private var generatedKey: UUID?
    private var fingerprint: [UInt8] = []
    /// Set for a request to the admin API: the path below `admin.pathPrefix`.
    private var adminPath: String?
    /// An admin answer whose body is being written as the client takes it, with what its
    /// ending needs.
    private var streamedAnswer: (body: StreamedJSON, status: Int, keepAlive: Bool)?
    /// The loop turn (its `now`) in which the streamed answer last refilled the client's output.
    private var streamedTurn: UInt64 = 0
    /// What one step of a streamed answer writes at least: one piece of 64 KiB.
    private static let streamedStep = 64 * 1024

    private static let maxReplayableBody = 64 * 1024

    init(client: ClientConnection, head: HTTPRequestHead, framing: HTTPBodyFraming) {
        self.client = client
        self.head = head
        self.requestFraming = framing
        body = RequestBodyBuffer(memory: framing == .none || framing == .contentLength(0) ? [] : client.proxyLoop.takeBodyBuffer())
        started = client.loop.now
        machine = ExchangeStateMachine(requestComplete: framing == .none || framing == .contentLength(0),
                                       isHead: head.method == "HEAD", clientSpeaksHTTP11: head.version == .http1_1)
    }

    var requestComplete: Bool { machine.requestComplete }

    /// The response head is out: too late to answer with an error status.
    var responseStarted: Bool { machine.responseStarted }

    /// True while request body bytes should not be read from the client.
    var bodyPaused: Bool {
        switch machine.bodyGate {
        case .open: false
        case .closed: true
        // Kept bytes not yet sent go first: the client waits until they are out.
        case .upstream: call.map { !$0.canAcceptBody || bodySent < body.count } ?? false
        }
    }

    // MARK: Request side

    func start() {
        if let expect = head.headers.first("Expect") {
            guard expect.lowercased() == "100-continue" else {
                fail(.expectationFailed("unsupported expectation: \(expect)"))
                return
            }
            machine.headParsed(expectsContinue: true)
        }
        switch client.context.adminRoute(for: head.target, on: client.listener,
                                         intercepted: client.interceptedOrigin != nil) {
        case .admin(let path):
            if let refusal = client.context.admin?.refusal(for: head, peerIsLoopback: client.peerIsLoopback) {
                answerAdmin(refusal, pretty: AdminRequest.rendersPretty(head, query: AdminRequest.split(path).1))
                return
            }
            adminPath = path
            body.keepWhole(expectedLength: announcedBodyLength)
            switch machine.readWholeBody(for: .admin) {
            case .sendContinue: sendContinueResponse()
            case .decide(.admin): runAdmin()
            default: break
            }
            return
        case .notOnAdminListener:
            answerAdmin(AdminResponse.error(.notFound,
                                            "this listener serves only the admin API, under \(client.context.adminPrefix)"),
                        pretty: false)
            return
        case .proxy:
            break
        }
        let context = client.context
        let route = ProxyRules.route(head, upstream: context.upstream, upstreamOrigin: context.upstreamOrigin,
                                     forwardProxy: context.forwardProxy, intercepted: client.interceptedOrigin)
        if case .success(let routed) = route, let refusal = knownRefusal(of: routed) {
            fail(.upstream(refusal))
            return
        }
        switch route {
        case .failure(let error):
            fail(error)
        case .success(.tunnel(let host, let port)) where client.context.intercepts(host):
            acceptInterceptedTunnel(to: Origin(scheme: .https, host: host, port: port))
        case .success(.tunnel(let host, let port)):
            machine.end()
            releaseBody()
            client.startTunnel(host: host, port: port)
        case .success(.origin(let origin, let target, _)):
            self.origin = origin
            self.target = target
            guard let queue = client.context.queue else {
                forward()
                return
            }
            // Most requests carry no `Outbox-*` field: one pass over the names spares the lookups.
            let control = head.headers.containsName(withLowercasedPrefix: "outbox-")
                ? Result { () throws(ControlHeaderError) in try ControlHeaders(parsing: head.headers) }
                : .success(ControlHeaders())
            if case .success(let parsed) = control { self.control = parsed }
            let method: QueueDecision.Method = client.context.queueMethods.contains(head.method)
                ? .queueable : .notQueueable(connectivity(of: origin, in: queue))
            carryOut(QueueDecision.atHead(control: control, method: method), queue)
        }
    }

    /// A forward-mode target or a tunnel that the pool already knows to be refused (one of
    /// Outbox's listeners, or an internal address for a wildcard-only host: SPEC §3), answered
    /// before anything is stored, intercepted or tunnelled. A name not resolved yet is refused
    /// when its connection would be made, and a stored one when it is replayed.
    private func knownRefusal(of route: Route) -> UpstreamError? {
        switch route {
        case .origin(let origin, _, forwardMode: true): client.proxyLoop.pool.knownRefusal(host: origin.host, port: origin.port)
        case .tunnel(let host, let port): client.proxyLoop.pool.knownRefusal(host: host.lowercased(), port: port)
        case .origin: nil
        }
    }

    private func beginCall() {
        guard let origin, let upstreamHead, let transport else { return }
        // Moved before the call starts, so whatever the call reports finds the exchange forwarding.
        let requestNeeds = machine.callStarted()
        let framing = requestFramingOverride ?? requestFraming
        let call = transport.startCall(to: origin, head: upstreamHead, bodyFraming: framing, handler: self)
        self.call = call
        // A call sent again takes the kept body from its first byte.
        bodySent = 0
        bodyProgressAt = client.loop.now
        upstreamBodyEndPending = false
        switch requestNeeds {
        case .finishUpstreamBody:
            upstreamBodyEndPending = framing != .none && framing != .contentLength(0)
        case .sendContinue:
            sendContinueResponse()
        default:
            break
        }
        // A request without kept bytes (a GET) has nothing to pump: the common case costs a test.
        if bodySent < body.count || upstreamBodyEndPending { pumpBody() }
        client.resumeBody()
    }

    /// Passes kept body bytes to the call while it takes them; once all are out, ends the
    /// call's body if the request is complete and lets a forward's resend copy go. Called
    /// again when the call's output drains. Re-entrant calls (a write inside it fails, or
    /// drains, and the call reports back) only ask for one more round.
    private func pumpBody() {
        if pumping {
            pumpAgain = true
            return
        }
        pumping = true
        defer { pumping = false }
        repeat {
            pumpAgain = false
            pumpRound()
        } while pumpAgain
    }

    private func pumpRound() {
        guard let call else { return }
        // A copy of the buffer (two references): what the call's reports may do to `body`
        // meanwhile (a failure that ends the exchange) cannot pull the bytes from under it.
        let kept = body
        // Only a spilled body is read through the loop's scratch buffer (borrowed, so that a
        // nested use finds it empty rather than in use).
        var scratch: [UInt8] = []
        if kept.isSpilled { swap(&scratch, &client.proxyLoop.spillScratch) }
        defer { if kept.isSpilled { swap(&scratch, &client.proxyLoop.spillScratch) } }
        while bodySent < kept.count, self.call === call, call.canAcceptBody {
            switch kept.read(from: bodySent, atMost: RequestBodyBuffer.filePiece, scratch: &scratch, { call.sendBody($0) }) {
            case .success(let length):
                // The call may have ended while it took them (then a new one starts afresh).
                guard self.call === call else { return }
                bodySent += length
                bodyProgressAt = client.loop.now
            case .failure(let failure):
                bodyNotKept(failure)
                return
            }
        }
        guard self.call === call, bodySent == body.count else { return }
        if upstreamBodyEndPending {
            upstreamBodyEndPending = false
            call.finishBody(trailers: bodyTrailers ?? HTTPHeaders())
        }
        // A queueable request keeps its whole body: a failed attempt turns into a stored one.
        if !machine.queueable && (body.count > Self.maxReplayableBody || !bodyCopyIsResendable) {
            releaseBody()
            bodyCopyIsResendable = false
        }
    }

    /// A call that stopped taking the request body (its origin reads nothing) for
    /// `reachability.responseTimeoutSeconds`, before any answer, has not answered in time:
    /// the same as no response head in time once the body is sent. Swept by the client's loop.
    func checkDeadlines(now: UInt64) {
        guard let call, !machine.responseStarted, !call.canAcceptBody,
              now &- bodyProgressAt >= Clock.nanos(client.context.upstreamTimeouts.response) else { return }
        call.cancel()
        self.call = nil
        upstreamFailed(.responseTimeout)
    }

    /// The length the request announced (`Content-Length`), nil for a chunked body.
    private var announcedBodyLength: Int? {
        if case .contentLength(let length) = requestFraming { return length }
        return nil
    }

    /// Keeps `bytes` in `body` (spilling when the memory budget is spent); false when the spill
    /// file failed, and the exchange has then answered `507`.
    private func keep(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let failure = body.append(bytes, lease: client.proxyLoop.bodyMemory, directory: client.context.dataDirectory)
        else { return true }
        bodyNotKept(failure)
        return false
    }

    private func bodyNotKept(_ failure: SpillFile.Failure) {
        client.logger.error("body_spill_failed", ["client": client.peerText, "target": head.target, "error": "\(failure)"])
        fail(.bodyNotKept("\(failure)"))
    }

    /// The body's fingerprint (`IdempotencyKey.fingerprint`); nil when a spilled body could not
    /// be read back (the exchange has answered `507`).
    private func bodyFingerprint() -> [UInt8]? {
        var scratch: [UInt8] = []
        swap(&scratch, &client.proxyLoop.spillScratch)
        defer { swap(&scratch, &client.proxyLoop.spillScratch) }
        switch body.fingerprint(method: head.method, target: target, scratch: &scratch) {
        case .success(let digest): return digest
        case .failure(let failure):
            bodyNotKept(failure)
            return nil
        }
    }

    /// Lets go of the kept body: its budget back to the loop's lease, its memory to the loop's
    /// spare buffers unless it was handed on, its spill file (if any) closed with its last holder.
    private func releaseBody() {
        let loop = client.proxyLoop
        if bodyHandedOn {
            body.release(to: loop.bodyMemory) { _ in }
        } else {
            body.release(to: loop.bodyMemory) { loop.recycle(body: &$0) }
        }
        bodySent = 0
    }

    private static let continueBytes = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    private func sendContinueResponse() {
        client.stream.enqueue(Self.continueBytes)
        client.stream.flushSoon()
    }

    func requestBody(_ bytes: UnsafeRawBufferPointer) {
        switch machine.requestBody() {
        case .forwardBody: break
        case .bufferBody:
            // Bounded by queue.maxBodyBytes: the parser stops a longer body with 413.
            _ = keep(bytes)
            return
        default: return
        }
        guard let call, bodySent == body.count else {
            // No call yet, or kept bytes still wait for it: these go after them, from `body`.
            if body.count + bytes.count > Self.maxReplayableBody { bodyCopyIsResendable = false }
            if keep(bytes) { pumpBody() }
            return
        }
        if bodyCopyIsResendable {
            if body.count + bytes.count <= Self.maxReplayableBody,
               body.appendIfAffordable(bytes, lease: client.proxyLoop.bodyMemory) {
                bodySent = body.count
            } else {
                // Too long to keep for a resend, or memory is short: this request is sent once.
                bodyCopyIsResendable = false
                releaseBody()
            }
        }
        call.sendBody(bytes)
        bodyProgressAt = client.loop.now
    }

    func requestEnded(trailers: HTTPHeaders) {
        bodyTrailers = trailers
        switch machine.requestEnded() {
        case .finish(let keepAlive):
            finish(status: responseStatus, keepAlive: keepAlive)
        case .decide(.admin):
            runAdmin()
        case .decide(.queue):
            if let queue = client.context.queue { decideQueueable(queue) }
        case .finishUpstreamBody:
            guard call != nil else { return }
            upstreamBodyEndPending = requestFraming != .none && requestFraming != .contentLength(0)
            pumpBody()
        default:
            break
        }
    }

    /// The client went away or broke the protocol: drop the upstream side.
    func abort() {
        streamedAnswer = nil
        releaseBody()
        guard machine.abort() == .cancelCall else { return }
        call?.cancel()
        call = nil
    }

    // MARK: Response side

    func upstreamReceivedHead(_ upstream: HTTPResponseHead, framing: HTTPBodyFraming) {
        let queue = origin == nil ? nil : client.context.queue
        // An unavailable status means "unreachable": a queueable request is stored instead.
        let unavailable = queue != nil && client.context.unavailableStatuses.contains(upstream.status)
        let keepAlive = settlesKeepAlive(after: .relayed(framing))
        let action = machine.upstreamHead(status: upstream.status, framing: framing, unavailable: unavailable,
                                          keepAlive: keepAlive)
        if action != .none, let queue, let origin {
            if unavailable {
                queue.originUnreachable(origin, reason: "HTTP \(upstream.status)")
            } else {
                queue.originAnswered(origin)
            }
        }
        switch action {
        case .storeInstead:
            call?.cancel()
            call = nil
            if let queue { storeInstead(queue) }
        case .relayHead(let chunked):
            responseStatus = upstream.status
            var response = ProxyRules.clientResponseHead(upstream, bodyFraming: framing,
                                                         reusing: client.proxyLoop.takeHeaders())
            if chunked { response.headers.add(field: "Transfer-Encoding", value: "chunked") }
            if let connection = KeepAlive.connectionHeader(persists: keepAlive, version: head.version) {
                response.headers.add(field: "Connection", value: connection)
            }
            client.stream.withOutput { HTTPSerializer.writeResponseHead(response, into: &$0) }
            client.proxyLoop.recycle(&response.headers)
        default:
            break
        }
    }

    func upstreamReceivedBody(_ bytes: UnsafeRawBufferPointer) {
        guard case .relayBody(let chunked) = machine.upstreamBody() else { return }
        responseBytes += bytes.count
        if chunked {
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
        guard machine.clientDrained() == .resumeResponse else { return }
        if streamedAnswer != nil {
            writeStreamedAnswer()
        } else {
            call?.resumeResponse()
        }
    }

    func upstreamFinished(trailers: HTTPHeaders) {
        let action = machine.upstreamEnded()
        switch action {
        case .finishResponse(let lastChunk, _), .drainRequest(let lastChunk):
            if lastChunk {
                client.stream.withOutput { HTTPSerializer.writeLastChunk(trailers: trailers, into: &$0) }
            }
            call = nil
        default:
            return
        }
        if case .finishResponse(_, let keepAlive) = action {
            finish(status: responseStatus, keepAlive: keepAlive)
        } else {
            // The origin answered before the whole body arrived (nginx's `return` does): the
            // upstream connection is not reusable (the connection itself saw to that), and the
            // rest of the body is drained from the client so its connection stays usable.
            client.stream.flushSoon()
        }
    }

    func upstreamFailed(_ error: UpstreamError) {
        let retryable: Bool
        if case .noResponse(_, retryable: true) = error { retryable = true } else { retryable = false }
        let queue = origin == nil ? nil : client.context.queue
        // A pooled connection the origin closed as we reused it is sent once more on a fresh one.
        let action = machine.upstreamFailed(retryable: retryable, replayable: retryable && isReplayable,
                                            unreachable: queue != nil && error.meansUnreachable,
                                            bodyCopyWhole: bodyCopyIsResendable)
        if action == .none { return }
        call = nil
        if action == .resendOnNewConnection {
            // The origin closed a reused connection: this is the same request once more, not a
            // new one for the fault rules to count.
            transport = client.proxyLoop.pool
            beginCall()
            return
        }
        var wentOffline = true
        if let queue, let origin, error.meansUnreachable {
            wentOffline = queue.originUnreachable(origin, reason: error.summary)
        }
        // An unreachable origin is logged when it goes offline, not once more for every request
        // that finds it so (a refused certificate would otherwise log each request).
        if wentOffline {
            client.logger.warn("upstream_failed", ["origin": origin?.description ?? "-", "error": error.summary])
        }
        switch action {
        case .cut:
            releaseBody()
            client.abortAfterFlush()
        case .storeInstead:
            if let queue { storeInstead(queue) }
        default:
            fail(.upstream(error))
        }
    }

    /// Idempotent methods (RFC 9110 §9.2.2) and requests carrying an idempotency key may be
    /// sent twice; anything else might act twice at the origin. (A queueable request carries
    /// an idempotency key upstream: the machine counts it replayable.)
    private var isReplayable: Bool {
        switch head.method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": return true
        default: return head.headers.contains(client.context.idempotencyHeader)
        }
    }

    func upstreamReadyForBody() {
        pumpBody()
        client.resumeBody()
    }

    func upstreamProcessedInput() {
        client.stream.flushSoon()
    }

    // MARK: Queueable requests

    /// Does what the queue's rules decided (`QueueDecision` holds the rules).
    private func carryOut(_ decision: QueueDecision, _ queue: QueueGateway) {
        guard let origin else { return }
        switch decision {
        case .readBody:
            body.keepWhole(expectedLength: announcedBodyLength)
            switch machine.readWholeBody(for: .queue) {
            case .sendContinue: sendContinueResponse()
            case .decide: decideQueueable(queue)
            default: break
            }
        case .forward:
            forward()
        case .store(let dependsOn):
            store(queue, dependsOn: dependsOn)
        case .replay(let stored, let id):
            answer(QueueAnswer.replayed(stored, operation: id))
        case .accept(let info):
            answerAccepted(info)
        case .reject(let refusal):
            fail(refusal.error(idempotencyHeader: client.context.idempotencyHeader, origin: origin,
                               queueMethods: client.context.queueMethodList))
        }
    }

    /// The whole request is here: gather what the queue knows about it, then decide. A store
    /// that reads from memory answers at once, on this loop; one that asks a database answers
    /// later, and the decision is made when its answer is back on the loop.
    private func decideQueueable(_ queue: QueueGateway) {
        guard let origin else { return }
        let key = IdempotencyKeyHeader(head.headers, name: client.context.idempotencyHeader)
        switch key {
        case .absent: generatedKey = client.proxyLoop.uuids.next()
        case .given(let given): idempotencyKey = given
        case .invalid, .repeated: break  // refused, so nothing to look up
        }
        let connectivity = connectivity(of: origin, in: queue)
        if queue.readsAtOnce {
            decide(key: key, connectivity: connectivity, queue: queue, origin: origin)
            return
        }
        if case .invalid = key {
            carryOut(.reject(.invalidKey), queue)
            return
        }
        if case .repeated = key {
            carryOut(.reject(.repeatedKey), queue)
            return
        }
        var question = QueueQuestion(origin: origin, key: nil, orderingKey: control.orderingKey,
                                     laneMatters: connectivity == .online && !control.forceQueue, dependsOn: control.dependsOn)
        if case .given = key { question.key = idempotencyKey }
        let bound = LoopBound(value: self, loop: client.loop)
        queue.lookUp(question) { facts in
            bound.loop.execute { bound.value.factsArrived(facts, key: key, connectivity: connectivity) }
        }
    }

    /// The store's answer to the question `decideQueueable` asked: decided now, unless the
    /// client went away meanwhile.
    private func factsArrived(_ facts: QueueFacts, key: IdempotencyKeyHeader, connectivity: QueueDecision.Connectivity) {
        guard machine.isDeciding(for: .queue), let queue = client.context.queue else { return }
        if let reason = facts.unavailable {
            carryOut(.reject(.storeUnavailable(reason)), queue)
            return
        }
        if let dependency = facts.dependency {
            lookedUpDependency = dependency.map { .resolved($0) } ?? .unresolved(control.dependsOn ?? "")
        }
        decide(key: key, connectivity: connectivity, known: facts.existing, laneHasQueued: facts.laneHasQueued,
               dependency: lookedUpDependency ?? .absent, queue: queue)
    }

    /// `Outbox-Depends-On` as the store resolved it when its answers came later: a forward that
    /// finds the origin unreachable stores with it, rather than asking again from the loop.
    private var lookedUpDependency: QueueDecision.Dependency?

    /// The decision with the facts read at once from a store that keeps them in memory.
    private func decide(key: IdempotencyKeyHeader, connectivity: QueueDecision.Connectivity, queue: QueueGateway, origin: Origin) {
        // Only a client's key can name a stored operation: a key made up just now is a fresh
        // random UUID, so its lookup (a lock and a hash probe per POST) is skipped.
        var known: Result<OperationSnapshot?, QueueReadError> = .success(nil)
        if case .given = key {
            known = Result { () throws(QueueReadError) in try queue.operation(withKey: idempotencyKey, origin: origin) }
        }
        // The lane matters only to a request that could be forwarded: one that is stored anyway
        // skips the lookup, and with it the index's lock, which the log's writer takes for every
        // record it indexes.
        let laneHasQueued = connectivity == .online && !control.forceQueue
            && queue.hasQueued(origin, orderingKey: control.orderingKey)
        decide(key: key, connectivity: connectivity, known: known, laneHasQueued: laneHasQueued,
               dependency: dependency(in: queue), queue: queue)
    }

    private func decide(key: IdempotencyKeyHeader, connectivity: QueueDecision.Connectivity,
                        known existing: Result<OperationSnapshot?, QueueReadError>, laneHasQueued: Bool,
                        dependency: QueueDecision.Dependency, queue: QueueGateway) {
        var known = QueueDecision.KnownKey.unknown
        switch existing {
        case .failure(let error):
            // The key is taken but its operation unreadable: storing or forwarding again could
            // deliver it twice.
            fail(.insufficientStorage("\(error)"))
            return
        case .success(let existing?):
            guard let digest = bodyFingerprint() else { return }
            fingerprint = digest
            let stored = existing.state.status == .completed ? existing.state.response : nil
            // Compared only where a stored response could be given back: a 202 for a pending
            // operation tells nothing the key does not.
            let sameCredentials = stored == nil || IdempotencyKey.credentials(in: head.headers) == existing.credentials
            known = .operation(existing, storedResponse: stored, sameCredentials: sameCredentials)
        case .success(nil):
            break
        }
        let request = QueueDecision.Request(
            key: key, known: known, fingerprint: fingerprint, connectivity: connectivity,
            laneHasQueued: laneHasQueued, forceQueue: control.forceQueue, dependency: dependency)
        carryOut(QueueDecision.decide(request), queue)
    }

    private func connectivity(of origin: Origin, in queue: QueueGateway) -> QueueDecision.Connectivity {
        if queue.forcedOffline { return .forcedOffline }
        return queue.isOnline(origin) ? .online : .offline
    }

    private func dependency(in queue: QueueGateway) -> QueueDecision.Dependency {
        if let lookedUpDependency { return lookedUpDependency }
        guard let reference = control.dependsOn, let origin else { return .absent }
        guard let id = queue.resolveDependency(reference, origin: origin) else { return .unresolved(reference) }
        return .resolved(id)
    }

    /// Forwarding found the origin unreachable: the queueable request is stored after all, its
    /// dependency resolved now.
    private func storeInstead(_ queue: QueueGateway) {
        carryOut(QueueDecision.storing(dependency(in: queue)), queue)
    }

    private var requestFramingOverride: HTTPBodyFraming?

    /// Builds the head that goes upstream, once: for a forward now, or for the stored copy.
    private func prepareUpstreamHead() {
        guard upstreamHead == nil, let origin else { return }
        // A `from: "client"` rule remembers the newest credentials clients send this origin,
        // forwarded or stored (one load when no rule learns).
        client.context.credentials?.learn(head.headers, origin: origin, memo: &client.credentialMemo)
        guard machine.queueable else {
            upstreamHead = ProxyRules.upstreamRequestHead(head, origin: origin, target: target,
                                                          clientAddress: client.peerText, bodyFraming: requestFraming,
                                                          clientScheme: client.scheme, reusing: client.proxyLoop.takeHeaders())
            return
        }
        var upstream = ProxyRules.upstreamRequestHead(head, origin: origin, target: target,
                                                      clientAddress: client.peerText, bodyFraming: .contentLength(body.count),
                                                      clientScheme: client.scheme, reusing: client.proxyLoop.takeHeaders())
        // Stored and replayed requests are framed by length; the key goes upstream on direct
        // forwards too, so a retry by the client is recognised by the origin. Headers
        // the client sent keep their place.
        if requestFraming != .contentLength(body.count) {
            upstream.headers.removeAll("Transfer-Encoding")
            upstream.headers.replaceOrAdd("Content-Length", String(body.count))
        }
        let headerName = client.context.idempotencyHeader
        if !upstream.headers.contains(headerName) {
            if let generatedKey {
                upstream.headers.add(headerName, uuid: generatedKey)
            } else {
                upstream.headers.add(headerName, idempotencyKey)
            }
        }
        upstreamHead = upstream
        requestFramingOverride = .contentLength(body.count)
    }

    private func forward() {
        prepareUpstreamHead()
        startForwarding()
    }

    /// Picks the transport and begins the call, after a name lookup when one is needed.
    private func startForwarding() {
        guard let origin else { return }
        let pool = client.proxyLoop.pool
        // Through the fault rules; the pool itself prepares (name lookup, TLS settings).
        transport = client.proxyLoop.directTransport
        if pool.isReady(origin) {
            beginCall()
        } else {
            machine.awaitConnection()
            pool.prepare(origin) { [weak self] result in
                guard let self, self.machine.isPreparing else { return }
                switch result {
                case .success: self.beginCall()
                case .failure(let error): self.upstreamFailed(error)
                }
            }
        }
    }

    private func store(_ queue: QueueGateway, dependsOn: UUID?) {
        prepareUpstreamHead()
        guard let origin, let upstreamHead else { return }
        machine.beginStoring()
        // Only a stored operation needs its fingerprint, and only under a key the client chose:
        // one made up here is first named by this request's 202, and if it comes back the queue
        // derives the digest from the stored record (SHA-256 of each body was 4 % of the CPU
        // of a durable 202). A direct forward never computes it.
        if fingerprint.isEmpty, generatedKey == nil {
            guard let digest = bodyFingerprint() else { return }
            fingerprint = digest
        }
        bodyHandedOn = true
        // A spilled body goes as its file: the record encoder copies it into the log in pieces.
        let stored = body.operationBody
        var request = OperationRequest(
            id: client.proxyLoop.uuids.next(), origin: origin, method: head.method, target: upstreamHead.target,
            headers: upstreamHead.headers, body: stored.bytes, idempotencyKey: generatedKey?.lowercasedText ?? idempotencyKey,
            fingerprint: fingerprint, priority: control.priority, tag: control.tag, dependsOn: dependsOn,
            createdAt: WallClock.millis(), orderingKey: control.orderingKey,
            credentials: IdempotencyKey.credentials(in: head.headers))
        request.spilledBody = stored.spilled
        let bound = LoopBound(value: self, loop: client.loop)
        queue.enqueue(request, freshKey: generatedKey) { result in
            bound.loop.execute { bound.value.storeFinished(result) }
        }
    }

    private func storeFinished(_ result: Result<OperationSnapshot, EnqueueError>) {
        // The client may have gone meanwhile: the operation is stored all the same.
        guard machine.isStoring, let queue = client.context.queue else { return }
        carryOut(QueueDecision.stored(result), queue)
    }

    /// The `202` for `info`, written straight into the client's output.
    private func answerAccepted(_ info: OperationSnapshot) {
        let keepAlive = settlesKeepAlive(after: .local)
        let context = client.context
        let template = client.interceptedOrigin == nil ? context.acceptedTemplate : context.absoluteAcceptedTemplate
        let connection = KeepAlive.connectionHeader(persists: keepAlive, version: head.version)
        responseBytes = client.stream.withOutput {
            QueueAnswer.writeAccepted(info, template: template, connection: connection, withBody: head.method != "HEAD",
                                      into: &$0)
        }
        finish(status: 202, keepAlive: keepAlive)
    }

    private func answer(_ reply: QueueAnswer) {
        answer(reply.head, body: reply.body)
    }

    private func answer(_ response: HTTPResponseHead, body: [UInt8]) {
        var response = response
        let keepAlive = settlesKeepAlive(after: .local)
        if let connection = KeepAlive.connectionHeader(persists: keepAlive, version: head.version) {
            response.headers.add("Connection", connection)
        }
        client.stream.withOutput { HTTPSerializer.writeResponseHead(response, into: &$0) }
        if head.method != "HEAD" { client.stream.enqueue(body) }
        responseBytes = body.count
        finish(status: response.status, keepAlive: keepAlive)
    }

    // MARK: Admin API

    private func runAdmin() {
        guard let admin = client.context.admin, let adminPath else { return }
        let whole: [UInt8]
        switch body.wholeBytes {
        case .success(let bytes): whole = bytes
        case .failure(let failure):
            bodyNotKept(failure)
            return
        }
        machine.beginStoring()
        let (path, query) = AdminRequest.split(adminPath)
        bodyHandedOn = true
        let request = AdminRequest(method: head.method, path: path, query: query, body: whole,
                                   pretty: AdminRequest.rendersPretty(head, query: query))
        let bound = LoopBound(value: self, loop: client.loop)
        Task {
            let response = await admin.handle(request)
            bound.loop.execute {
                guard bound.value.machine.isStoring else { return }
                bound.value.answerAdmin(response, pretty: request.pretty)
            }
        }
    }

    /// `200` at once, whether the origin is reachable or not: the requests inside the tunnel
    /// are forwarded or stored one by one, after the client's TLS handshake with us.
    private func acceptInterceptedTunnel(to origin: Origin) {
        self.origin = origin
        client.stream.enqueue(Self.connectionEstablished)
        client.beginInterception(of: origin)
        finish(status: 200, keepAlive: true)
    }

    private static let connectionEstablished = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)

    private func answerAdmin(_ response: AdminResponse, pretty: Bool) {
        if response.streamsEvents, let hub = client.context.events {
            machine.end()
            releaseBody()
            client.startEventStream(from: hub, lastEventID: head.headers.first("Last-Event-ID"))
            return
        }
        if let streamed = response.streamed {
            answerStreamed(response, streamed)
            return
        }
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
        answer(HTTPResponseHead(status: response.status, headers: headers), body: body)
    }

    /// Writes the head of an admin answer whose body is streamed (an operation's view), framed
    /// by its known length, then the body as the client's output drains.
    private func answerStreamed(_ response: AdminResponse, _ streamed: StreamedJSON) {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        headers.add("Content-Length", String(streamed.count))
        headers.add("Cache-Control", "no-store")
        for (name, value) in response.extraHeaders { headers.add(name, value) }
        let keepAlive = settlesKeepAlive(after: .local)
        if let connection = KeepAlive.connectionHeader(persists: keepAlive, version: head.version) {
            headers.add("Connection", connection)
        }
        client.stream.withOutput { HTTPSerializer.writeResponseHead(HTTPResponseHead(status: response.status, headers: headers), into: &$0) }
        responseBytes = streamed.count
        guard head.method != "HEAD", !streamed.isComplete else {
            finish(status: response.status, keepAlive: keepAlive)
            return
        }
        machine.beginAnswering()
        streamedAnswer = (streamed, response.status, keepAlive)
        writeStreamedAnswer()
    }

    /// Writes the streamed answer's next pieces while the client's output holds less than its
    /// low-water mark, so that its draining below the mark (`clientDrained`) asks for more: a
    /// view holds one piece of the body and what the socket has not taken yet, whatever the
    /// client's pace. The pieces are read from the log here, on the loop, 48 KiB at a time; a
    /// second refill in one turn of the loop is sent on the next turn, so a client that reads as
    /// fast as it is written gets a few hundred KiB per turn, and the loop's other connections
    /// theirs in between.
    private func writeStreamedAnswer() {
        guard var answer = streamedAnswer.take() else { return }
        let stream = client.stream
        var more = true
        while more, stream.queuedOutputBytes < SocketStream.lowWater {
            let written = stream.withOutput { out in
                Result { () throws(ByteSourceError) in try answer.body.write(into: &out, budget: Self.streamedStep) }
            }
            switch written {
            case .success(let remains):
                more = remains
            case .failure(let error):
                // The head is out: closing after what was written tells the client it is short.
                client.logger.error("admin_view_failed", ["target": head.target, "error": error.description])
                machine.end()
                client.abortAfterFlush()
                return
            }
        }
        guard more else {
            finish(status: answer.status, keepAlive: answer.keepAlive)
            return
        }
        streamedAnswer = answer
        let turn = client.loop.now
        if turn == streamedTurn {
            stream.flushOnNextTurn()
        } else {
            streamedTurn = turn
            stream.flushSoon()
        }
    }

    // MARK: Ending

    private func fail(_ error: ProxyError) {
        let keepAlive = settlesKeepAlive(after: .error(status: error.status))
        machine.end()
        call?.cancel()
        call = nil
        client.stream.enqueue(ErrorResponse.bytes(for: error, close: !keepAlive,
                                                  retryAfterSeconds: client.context.retryAfterSeconds))
        finish(status: error.status, keepAlive: keepAlive)
    }

    /// Whether the client's connection outlives this response (`KeepAlive` holds the rules).
    private func settlesKeepAlive(after response: KeepAlive.Response) -> Bool {
        KeepAlive.persists(after: response, to: head, requestComplete: machine.requestComplete,
                           serverDraining: client.isDraining)
    }

    private func finish(status: Int, keepAlive: Bool) {
        machine.end()
        // Serialised already, and never sent again now: its storage serves the next request.
        if var spent = upstreamHead.take() {
            client.proxyLoop.recycle(&spent.headers)
        }
        client.stream.flushSoon()
        client.proxyLoop.metrics.request(nanoseconds: client.loop.now &- started,
                                         forwardedStatus: responseStatus == 0 ? nil : responseStatus)
        let logger = client.logger
        if logger.isEnabled(.info) {
            let micros = (client.loop.now &- started) / 1000
            logger.info("request", [
                "client": client.peerText, "method": head.method, "target": head.target,
                "status": String(status), "upstream": origin?.description ?? "-",
                "bytes": String(responseBytes), "ms": Self.millisecondsText(micros),
            ])
        }
        // Nothing reads the request's fields after this: they hold the next head's fields,
        // and a body that was not handed to the queue or the admin API holds the next body.
        client.recycle(&head.headers)
        releaseBody()
        client.exchangeDidFinish(keepAlive: keepAlive)
    }

    /// Whole microseconds as milliseconds (`1.234`): at most three decimals, for the access line.
    private static func millisecondsText(_ micros: UInt64) -> String {
        String(Double(micros) / 1000)
    }
}

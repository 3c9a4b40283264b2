import Glibc
import OutboxHTTP
import OutboxModel
import Synchronization

/// Sends one complete request to an origin and collects the complete response, as an async
/// call: what the replayer and the reachability probes need (the proxy path streams instead).
///
/// The exchange itself runs on one of the server's event loops, on the same keep-alive pools
/// and transports as forwarded traffic; only the hand-over crosses threads.
public final class UpstreamClient: Sendable {
    private let loops: [LoopBound<any UpstreamLoop>]
    private let next = Atomic<Int>(0)
    /// Run tasks on each loop: a caller on one (a task preferring its executor) has its
    /// exchanges started in place, on that loop, with no hand-over at all.
    package let loopExecutors: [LoopTaskExecutor]
    /// The first loop's executor.
    package var loopExecutor: LoopTaskExecutor? { loopExecutors.first }

    package init(loops: [LoopBound<any UpstreamLoop>]) {
        self.loops = loops
        loopExecutors = loops.map { LoopTaskExecutor(loop: $0.loop) }
    }

    /// Sends `head` (origin-form target, final headers) with `body`; the response body is kept
    /// when it is at most `maxResponseBytes` long, else read to its end, counted and dropped
    /// (`truncated` says so, `bodySize` how long it was).
    /// A probe goes to the pool itself; a replay attempt through the loop's `replayTransport`.
    public enum Purpose: Sendable { case replay, probe }

    public func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8],
                     maxResponseBytes: Int, purpose: Purpose) async -> Result<CollectedResponse, UpstreamError> {
        await send(to: origin, head: head, body: body, maxResponseBytes: maxResponseBytes, purpose: purpose, whileInFlight: {})
    }

    /// `send`, running `whileInFlight` once the request has left: from a loop, the request is
    /// written at once rather than at the end of the loop's turn, so that `whileInFlight`
    /// overlaps the upstream's work instead of delaying its start. Once `cancellation` is
    /// cancelled the call ends at once (on its loop): its connection is closed, never pooled,
    /// and the result is a failure; one cancelled before it started sends nothing.
    package func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8], maxResponseBytes: Int, purpose: Purpose,
                      cancellation: CallCancellation? = nil,
                      whileInFlight: @Sendable () -> Void) async -> Result<CollectedResponse, UpstreamError> {
        guard !loops.isEmpty else { return .failure(.connectFailed("no event loop")) }
        // On a loop already (a task preferring `loopExecutor`): start there, now.
        let current = loops.first(where: { $0.loop.isCurrent })
        let state = current ?? loops[next.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
        return await withCheckedContinuation { continuation in
            let begin: @Sendable () -> Void = {
                let collector = ResponseCollector(limit: maxResponseBytes, continuation: continuation)
                if let cancellation {
                    // Handed to the loop: the canceller may be any thread (an admin delete, under
                    // the queue's lock), the call lives on this loop.
                    let bound = LoopBound(value: collector, loop: state.loop)
                    guard cancellation.onCancel({ bound.loop.execute { bound.value.cancel() } }) else {
                        collector.cancel()
                        return
                    }
                }
                collector.start(origin: origin, head: head, body: body, proxyLoop: state.value, purpose: purpose)
            }
            if current != nil {
                begin()
                state.loop.flushNow()
            } else {
                state.loop.execute(begin)
            }
            whileInFlight()
        }
    }
}

/// Runs one exchange on a loop and resumes the caller once, with the response or the error.
private final class ResponseCollector: UpstreamResponseHandler {
    private let limit: Int
    private var continuation: CheckedContinuation<Result<CollectedResponse, UpstreamError>, Never>?
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []
    private var truncated = false
    /// Body bytes received, kept or not.
    private var bodySize = 0
    private var call: UpstreamCall?
    private var begin: (() -> Void)?
    private var retried = false
    private var cancelled = false

    init(limit: Int, continuation: CheckedContinuation<Result<CollectedResponse, UpstreamError>, Never>) {
        self.limit = limit
        self.continuation = continuation
    }

    func start(origin: Origin, head: HTTPRequestHead, body: [UInt8], proxyLoop: any UpstreamLoop, purpose: UpstreamClient.Purpose) {
        let framing: HTTPBodyFraming = body.isEmpty && !["POST", "PUT", "PATCH"].contains(head.method) ? .none : .contentLength(body.count)
        var head = head
        head.headers.removeAll("Content-Length")
        head.headers.removeAll("Transfer-Encoding")
        if framing != .none { head.headers.add("Content-Length", String(body.count)) }
        let pool = proxyLoop.pool
        var transport: UpstreamTransport = purpose == .probe ? pool : proxyLoop.replayTransport
        let begin: () -> Void = { [self] in
            let call = transport.startCall(to: origin, head: head, bodyFraming: framing, handler: self)
            self.call = call
            // A resend after a stale pooled connection is the same attempt, not a new one.
            transport = pool
            if framing != .none {
                if !body.isEmpty { body.withUnsafeBytes { call.sendBody($0) } }
                call.finishBody(trailers: HTTPHeaders())
            }
        }
        self.begin = begin
        if proxyLoop.pool.isReady(origin) {
            begin()
        } else {
            proxyLoop.pool.prepare(origin) { [self] result in
                // Cancelled while the name was looked up: answered already, nothing to send.
                guard !cancelled else { return }
                switch result {
                case .success: begin()
                case .failure(let error): resume(.failure(error))
                }
            }
        }
    }

    /// Ends the call now: the exchange is abandoned (its connection closed, not returned to the
    /// pool) and the caller hears a failure. Nothing once it has answered.
    func cancel() {
        guard continuation != nil else { return }
        cancelled = true
        call?.cancel()
        resume(.failure(head == nil ? .noResponse("cancelled", retryable: false) : .truncated("cancelled")))
    }

    private func resume(_ result: Result<CollectedResponse, UpstreamError>) {
        call = nil
        begin = nil
        continuation?.resume(returning: result)
        continuation = nil
    }

    func upstreamReceivedHead(_ head: HTTPResponseHead, framing: HTTPBodyFraming) {
        self.head = head
    }

    func upstreamReceivedBody(_ bytes: UnsafeRawBufferPointer) {
        bodySize += bytes.count
        guard !truncated else { return }
        if bodySize <= limit {
            body.append(contentsOf: bytes)
        } else {
            // Over the limit: none of it is kept, so a part can never pass for the whole.
            body = []
            truncated = true
        }
    }

    func upstreamFinished(trailers: HTTPHeaders) {
        guard let head else {
            resume(.failure(.invalidResponse("no response head")))
            return
        }
        resume(.success(CollectedResponse(head: head, body: body, truncated: truncated, bodySize: bodySize)))
    }

    func upstreamFailed(_ error: UpstreamError) {
        // A pooled connection the origin closed as we reused it: every caller of this client
        // sends an idempotency key, so one more try on a fresh connection is safe.
        if case .noResponse(_, retryable: true) = error, !retried, head == nil, let begin {
            retried = true
            body = []
            bodySize = 0
            begin()
            return
        }
        resume(.failure(error))
    }

    func upstreamReadyForBody() {}
    func upstreamProcessedInput() {}
}

import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import OutboxHTTP
import OutboxModel

/// The `https://` transport: URLSession from FoundationNetworking, hardened for a proxy.
///
/// No redirects are followed (the 3xx goes to the client), no cookies are stored or sent, no
/// cache is used. What URLSession cannot pass through unchanged is documented in the README:
/// it adds headers of its own, decompresses bodies (so `Content-Encoding` and
/// `Content-Length` are dropped and the body is re-framed), merges duplicate response headers,
/// buffers the request body, and knows no trailers or 1xx responses.
package final class SecureTransportFactory: Sendable {
    private let timeouts: UpstreamTimeouts
    // Made on first use: a proxy without https origins never starts URLSession's threads.
    private let state = Mutex<(session: URLSession, delegate: SessionDelegate, transports: [ObjectIdentifier: SecureTransport])?>(nil)

    package init(timeouts: UpstreamTimeouts) {
        self.timeouts = timeouts
    }

    private func makeSession() -> (URLSession, SessionDelegate) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalAndRemoteCacheData
        configuration.timeoutIntervalForRequest = max(timeouts.response, timeouts.connect)
        configuration.httpMaximumConnectionsPerHost = 64
        let delegate = SessionDelegate()
        return (URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil), delegate)
    }

    /// The transport whose callbacks land on `loop`.
    package func transport(for loop: EventLoop) -> UpstreamTransport {
        state.withLock { state in
            var current = state ?? {
                let (session, delegate) = makeSession()
                return (session, delegate, [:])
            }()
            defer { state = current }
            if let existing = current.transports[ObjectIdentifier(loop)] { return existing }
            let created = SecureTransport(session: current.session, delegate: current.delegate, loop: loop)
            current.transports[ObjectIdentifier(loop)] = created
            return created
        }
    }
}

/// URLSession-backed transport bound to one loop.
final class SecureTransport: UpstreamTransport, @unchecked Sendable {
    let session: URLSession
    let delegate: SessionDelegate
    unowned let loop: EventLoop

    init(session: URLSession, delegate: SessionDelegate, loop: EventLoop) {
        self.session = session
        self.delegate = delegate
        self.loop = loop
    }

    func startCall(to origin: Origin, head: HTTPRequestHead, bodyFraming: HTTPBodyFraming,
                   handler: UpstreamResponseHandler) -> UpstreamCall {
        SecureCall(transport: self, origin: origin, head: head, framing: bodyFraming, handler: handler)
    }
}

/// One URLSession task. The request body is collected first (URLSession wants it whole or as
/// a stream we would have to bridge); the response streams back through the delegate.
final class SecureCall: UpstreamCall {
    private let transport: SecureTransport
    private let origin: Origin
    private let head: HTTPRequestHead
    /// Strong until the exchange ends (every ending path sets it to nil).
    private var handler: UpstreamResponseHandler?
    private var body = Data()
    private var task: URLSessionDataTask?
    private var suspended = false

    init(transport: SecureTransport, origin: Origin, head: HTTPRequestHead, framing: HTTPBodyFraming,
         handler: UpstreamResponseHandler) {
        self.transport = transport
        self.origin = origin
        self.head = head
        self.handler = handler
        if framing == .none || framing == .contentLength(0) { launch() }
    }

    var canAcceptBody: Bool { true }

    func sendBody(_ bytes: UnsafeRawBufferPointer) {
        body.append(contentsOf: bytes)
    }

    func finishBody(trailers: HTTPHeaders) {
        if task == nil { launch() }
    }

    private func launch() {
        guard let url = URL(string: "https://\(origin.authority)\(head.target)") else {
            let bound = LoopBound(value: self, loop: transport.loop)
            transport.loop.execute { bound.value.deliverFailure(.connectFailed("invalid URL")) }
            return
        }
        var request = URLRequest(url: url)
        request.httpMethod = head.method
        request.httpShouldHandleCookies = false
        for (name, value) in head.headers {
            let lower = name.lowercased()
            // URLSession frames the body itself and sets Host from the URL.
            if lower == "host" || lower == "content-length" || lower == "transfer-encoding" { continue }
            request.addValue(value, forHTTPHeaderField: name)
        }
        if !body.isEmpty || head.method == "POST" || head.method == "PUT" || head.method == "PATCH" {
            request.httpBody = body
        }
        let task = transport.session.dataTask(with: request)
        self.task = task
        transport.delegate.register(task.taskIdentifier, LoopBound(value: self, loop: transport.loop))
        task.resume()
    }

    func pauseResponse() {
        guard !suspended, let task else { return }
        suspended = true
        task.suspend()
    }

    func resumeResponse() {
        guard suspended, let task else { return }
        suspended = false
        task.resume()
    }

    func cancel() {
        handler = nil
        task?.cancel()
    }

    // MARK: Delegate events, on the loop

    func deliverHead(_ response: HTTPURLResponse) {
        var headers = HTTPHeaders()
        for (key, value) in response.allHeaderFields {
            guard let name = key as? String, let value = value as? String else { continue }
            let lower = name.lowercased()
            // The body we relay is already decoded and re-framed by URLSession.
            if lower == "content-length" || lower == "content-encoding" || lower == "transfer-encoding" { continue }
            headers.add(name, value)
        }
        let status = response.statusCode
        let framing: HTTPBodyFraming = head.method == "HEAD" || status == 204 || status == 304 ? .none : .untilClose
        handler?.upstreamReceivedHead(HTTPResponseHead(status: status, headers: headers), framing: framing)
    }

    func deliverBody(_ data: Data) {
        data.withUnsafeBytes { handler?.upstreamReceivedBody($0) }
        handler?.upstreamProcessedInput()
    }

    func deliverEnd() {
        let handler = self.handler
        self.handler = nil
        handler?.upstreamFinished(trailers: HTTPHeaders())
    }

    func deliverFailure(_ error: UpstreamError) {
        let handler = self.handler
        self.handler = nil
        handler?.upstreamFailed(error)
    }

    static func classify(_ error: Error, responded: Bool) -> UpstreamError {
        guard let urlError = error as? URLError else { return .noResponse(error.localizedDescription, retryable: false) }
        if responded { return .truncated(urlError.localizedDescription) }
        switch urlError.code {
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet,
             .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
             .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected:
            return .connectFailed(urlError.localizedDescription)
        case .timedOut:
            return .responseTimeout
        default:
            // libcurl's TLS failures arrive as code -1 ("unknown"); a failed handshake means the
            // request never left, which the queue must know.
            // The userInfo's own description, not the error's: its key order is random.
            let text = urlError.userInfo[NSLocalizedDescriptionKey] as? String ?? urlError.localizedDescription
            if text.contains("SSL") || text.contains("certificate") { return .connectFailed("TLS: \(text)") }
            return .noResponse(urlError.localizedDescription, retryable: false)
        }
    }
}

/// URLSession's delegate: routes each task's events to its call's loop; refuses redirects.
final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let calls = Mutex<[Int: (call: LoopBound<SecureCall>, responded: Bool)]>([:])

    func register(_ id: Int, _ call: LoopBound<SecureCall>) {
        calls.withLock { $0[id] = (call, false) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        let entry = calls.withLock { map -> LoopBound<SecureCall>? in
            map[dataTask.taskIdentifier]?.responded = true
            return map[dataTask.taskIdentifier]?.call
        }
        if let entry, let http = response as? HTTPURLResponse {
            entry.loop.execute { entry.value.deliverHead(http) }
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let entry = calls.withLock({ $0[dataTask.taskIdentifier]?.call }) else { return }
        entry.loop.execute { entry.value.deliverBody(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        guard let (entry, responded) = calls.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let error {
            let failure = SecureCall.classify(error, responded: responded)
            entry.loop.execute { entry.value.deliverFailure(failure) }
        } else {
            entry.loop.execute { entry.value.deliverEnd() }
        }
    }
}

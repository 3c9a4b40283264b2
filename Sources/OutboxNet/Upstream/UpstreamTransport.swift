import OutboxHTTP
import OutboxModel

/// Receives one upstream response, piece by piece, on the loop of the call.
package protocol UpstreamResponseHandler: AnyObject {
    func upstreamReceivedHead(_ head: HTTPResponseHead, framing: HTTPBodyFraming)
    func upstreamReceivedBody(_ bytes: UnsafeRawBufferPointer)
    func upstreamFinished(trailers: HTTPHeaders)
    func upstreamFailed(_ error: UpstreamError)
    /// The request body may flow again after `canAcceptBody` was false.
    func upstreamReadyForBody()
    /// One batch of received bytes was handled: the moment to flush what it produced.
    func upstreamProcessedInput()
}

/// One request in flight to an origin: the caller streams the body in and steers the response's
/// flow; the transport reports back through ``UpstreamResponseHandler``.
package protocol UpstreamCall: AnyObject {
    var canAcceptBody: Bool { get }
    func sendBody(_ bytes: UnsafeRawBufferPointer)
    func finishBody(trailers: HTTPHeaders)
    func pauseResponse()
    func resumeResponse()
    /// Abandons the exchange; no handler callback follows.
    func cancel()
}

/// Something that can carry an HTTP/1.1 exchange to an origin: the loop's `UpstreamPool`, for
/// `http://` and `https://` alike; the seam where another transport (a test's) plugs in.
package protocol UpstreamTransport: AnyObject {
    /// `head` is final (origin-form target, `Host`, framing headers); `bodyFraming` says how the
    /// body passed to `sendBody` is delimited on the wire.
    func startCall(to origin: Origin, head: HTTPRequestHead, bodyFraming: HTTPBodyFraming,
                   handler: UpstreamResponseHandler) -> UpstreamCall
}

/// Timeouts of the upstream side, from `reachability`.
package struct UpstreamTimeouts: Sendable {
    package var connect: Double
    package var response: Double
    var poolIdle: Double

    package init(connect: Double, response: Double, poolIdle: Double) {
        self.connect = connect
        self.response = response
        self.poolIdle = poolIdle
    }
}

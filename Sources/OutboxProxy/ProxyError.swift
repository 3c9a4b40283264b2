import OutboxHTTP
import OutboxModel

/// Every error the proxy answers itself, with its status and the code of the JSON envelope
/// `{"error":{"code":…,"message":…}}`. Core errors are translated here, once.
enum ProxyError: Error, Equatable {
    case malformed(HTTPParseError)
    case badRequest(String)
    case forbidden(String)
    /// A request inside an intercepted tunnel for another authority than the tunnel's.
    case misdirected(String)
    case noUpstream
    case expectationFailed(String)
    case requestTimeout
    case upstream(UpstreamError)
    case unavailable(String)
    case tooManyConnections
    case loopDetected
    /// An idempotency key reused with another method, target or body.
    case keyReused(String)
    /// An idempotency key of a completed operation, repeated with other credentials: its stored
    /// response is not theirs to read.
    case keyInUse(String)
    /// The queue cannot take more: `maxOperations` reached or the disk is full.
    case insufficientStorage(String)
    /// The queue's store cannot be reached (the PostgreSQL store's database is down): nothing
    /// was stored, try again later.
    case storeUnavailable(String)
    /// A request body beyond `limits.bodyMemoryBytes` could not be written to (or read back
    /// from) its spill file in `dataDirectory`.
    case bodyNotKept(String)

    /// The table: one code per case (the code has the status, `ErrorCode`).
    var code: ErrorCode {
        switch self {
        case .malformed(let error):
            switch error.status {
            case 413: .payloadTooLarge
            case 431: .headerTooLarge
            case 501: .notImplemented
            case 505: .httpVersionNotSupported
            default: .badRequest
            }
        case .badRequest: .badRequest
        case .forbidden: .forbidden
        case .misdirected: .misdirectedRequest
        case .noUpstream: .noUpstream
        case .expectationFailed: .expectationFailed
        case .requestTimeout: .requestTimeout
        case .upstream(let error):
            switch error {
            // Refused and dropped-before-a-complete-head both mean unreachable: 503, retry later.
            case .connectFailed, .tlsFailed, .noResponse: .upstreamUnavailable
            // RFC 9110 §15.6.5: no timely answer is 504 Gateway Timeout, though the queue still
            // counts the origin unreachable (a queueable request is stored, not answered 504).
            case .responseTimeout: .gatewayTimeout
            case .invalidResponse, .truncated: .badGateway
            // SPEC §3: a target that is Outbox itself is a loop (508 Loop Detected, RFC 5842
            // §7.2); an internal address a wildcard may not reach is refused as a host outside
            // allowedHosts is.
            case .targetRefused(.ownListener): .forwardingLoop
            case .targetRefused(.internalAddress): .forbidden
            // Outbox's own shortage (no descriptor for the upstream socket): try again shortly.
            case .localResourcesExhausted: .localResourcesExhausted
            }
        case .unavailable, .tooManyConnections: .upstreamUnavailable
        case .loopDetected: .loopDetected
        case .keyReused: .idempotencyKeyReused
        case .keyInUse: .idempotencyKeyInUse
        case .insufficientStorage, .bodyNotKept: .insufficientStorage
        case .storeUnavailable: .storeUnavailable
        }
    }

    var status: Int { code.status }

    var message: String {
        switch self {
        case .malformed(let error): error.message
        case .badRequest(let text), .forbidden(let text), .misdirected(let text), .expectationFailed(let text),
             .unavailable(let text): text
        case .noUpstream: "no upstream is configured for origin-form requests: set \"upstream\" or send an absolute URL"
        case .requestTimeout: "request header not received within limits.headerTimeoutSeconds"
        case .upstream(let error):
            switch error {
            case .connectFailed, .tlsFailed, .noResponse: "upstream unreachable (\(error.summary))"
            case .responseTimeout: "upstream did not answer within reachability.responseTimeoutSeconds"
            case .targetRefused(.ownListener(let address)):
                "the target resolves to \(address), one of Outbox's own listeners: forwarding there would loop"
            case .targetRefused(.internalAddress(let address)):
                "the target resolves to \(address), a loopback, link-local or unspecified address, which \"*\" and "
                    + "\"*.suffix\" in forwardProxy.allowedHosts do not match while listen is not loopback: "
                    + "name the host exactly to allow it"
            case .localResourcesExhausted(let reason):
                "Outbox has no file descriptor to spare for this request (\(reason)); the upstream is not to blame: retry shortly"
            default: "bad upstream answer (\(error.summary))"
            }
        case .tooManyConnections: "too many connections (limits.maxConnections)"
        case .loopDetected: "request loop: it already passed through Outbox 3 times (Via)"
        case .keyReused(let header): "\(header) was already used for a different request (method, target or body)"
        case .keyInUse(let header):
            "\(header) belongs to a request made with other credentials (Authorization, Cookie, Proxy-Authorization)"
        case .insufficientStorage(let reason): "the queue cannot store this request: \(reason)"
        case .storeUnavailable(let reason): "the queue's store is unavailable, nothing was stored: \(reason)"
        case .bodyNotKept(let reason): "the request body could not be kept in the data directory: \(reason)"
        }
    }

    /// Whether the answer should tell the client when to retry (every 503 carries Retry-After).
    var wantsRetryAfter: Bool { status == 503 }

    /// Outbox itself ran out of descriptors: the request failed here, the origin was not asked.
    var isLocalResourceShortage: Bool {
        if case .upstream(.localResourcesExhausted) = self { return true }
        return false
    }

    /// The `Retry-After` this error asks for itself, in seconds; nil: the caller's (the probe
    /// interval, for an unreachable origin). A shortage of descriptors is usually over within
    /// the listener's longest pause (``AcceptBackoff``), so a second is the honest wait.
    var ownRetryAfterSeconds: Int? {
        isLocalResourceShortage ? 1 : nil
    }
}

/// Builds the complete bytes of an error response in the JSON envelope.
enum ErrorResponse {
    static func bytes(for error: ProxyError, close: Bool, retryAfterSeconds: Int) -> [UInt8] {
        let body = Array(#"{"error":{"code":"\#(error.code.rawValue)","message":\#(JSON.quoted(error.message))}}"#.utf8) + [10]
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        headers.add("Content-Length", String(body.count))
        if error.wantsRetryAfter { headers.add("Retry-After", String(max(1, error.ownRetryAfterSeconds ?? retryAfterSeconds))) }
        if close { headers.add("Connection", "close") }
        var out: [UInt8] = []
        out.reserveCapacity(256 + body.count)
        HTTPSerializer.writeResponseHead(HTTPResponseHead(status: error.status, headers: headers), into: &out)
        out.append(contentsOf: body)
        return out
    }
}

/// Every `code` of the error envelope `{"error":{"code":…,"message":…}}` that Outbox answers
/// with, and the one status each goes with: the proxy's own errors, the queue's and the admin
/// API's draw from this one table, so a code cannot mean two statuses, and
/// `docs/admin-api.md` lists every case (a test reads it). `code` is for programs and stable;
/// the message beside it is for people and may change.
public enum ErrorCode: String, CaseIterable, Sendable {
    case badRequest = "bad_request"
    case unauthorized
    case forbidden
    case notFound = "not_found"
    case methodNotAllowed = "method_not_allowed"
    case requestTimeout = "request_timeout"
    case conflict
    case faultLimit = "fault_limit"
    case payloadTooLarge = "payload_too_large"
    case expectationFailed = "expectation_failed"
    case misdirectedRequest = "misdirected_request"
    case idempotencyKeyReused = "idempotency_key_reused"
    case idempotencyKeyInUse = "idempotency_key_in_use"
    case headerTooLarge = "header_too_large"
    case notImplemented = "not_implemented"
    case badGateway = "bad_gateway"
    case noUpstream = "no_upstream"
    case upstreamUnavailable = "upstream_unavailable"
    case localResourcesExhausted = "local_resources_exhausted"
    case storeUnavailable = "store_unavailable"
    case gatewayTimeout = "gateway_timeout"
    case httpVersionNotSupported = "http_version_not_supported"
    case insufficientStorage = "insufficient_storage"
    case loopDetected = "loop_detected"
    case forwardingLoop = "forwarding_loop"

    public var status: Int {
        switch self {
        case .badRequest: 400
        case .unauthorized: 401
        case .forbidden: 403
        case .notFound: 404
        case .methodNotAllowed: 405
        case .requestTimeout: 408
        case .conflict, .faultLimit: 409
        case .payloadTooLarge: 413
        case .expectationFailed: 417
        case .misdirectedRequest: 421
        case .idempotencyKeyReused, .idempotencyKeyInUse: 422
        case .headerTooLarge: 431
        case .notImplemented: 501
        case .badGateway, .noUpstream: 502
        case .upstreamUnavailable, .localResourcesExhausted, .storeUnavailable: 503
        case .gatewayTimeout: 504
        case .httpVersionNotSupported: 505
        case .insufficientStorage: 507
        case .loopDetected, .forwardingLoop: 508
        }
    }
}

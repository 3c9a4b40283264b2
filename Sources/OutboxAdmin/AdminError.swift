import OutboxModel

/// Every error the admin API answers, as one table: each case has exactly one status and one
/// `code`, and carries only what varies in its message. Handlers and the gate throw or return a
/// case; `response` turns it into the one JSON error envelope (`AdminResponse.error`, which the
/// proxy's own errors share), so a status, a code and its wording cannot drift apart from one
/// endpoint to the next. Several cases may share a code (two kinds of `not_found`), never with
/// different statuses.
package enum AdminError: Error, Equatable, Sendable {
    /// A query parameter or the body is not what the endpoint takes: `field: expected …`,
    /// with the offending value appended when the message names it.
    case invalid(field: String, expected: String, got: String? = nil)
    /// An admin token is set and the request does not carry it (or carries another).
    case tokenRequired
    /// No admin token is set and the peer is not on loopback.
    case notLoopback
    /// No admin token is set and the request came through a proxy (`Via` or `Forwarded`):
    /// its loopback peer says nothing about who sent it.
    case proxied
    /// The `Host` is neither a loopback name nor the listen address: a DNS-rebound name.
    case foreignHost(String)
    /// A browser page from another site (`Origin`) is calling.
    case crossSiteOrigin(String)
    /// The path names no admin endpoint.
    case noEndpoint(method: String, path: String)
    /// No operation has this id (or the id is not a UUID at all).
    case noOperation(String)
    /// The endpoint exists but does not take this method; `allow` lists the ones it takes.
    case methodNotAllowed(allow: [String])
    /// Only failed, conflict and pending operations can be retried.
    case notRetryable(id: String, status: OperationStatus)
    /// No fault rule has this id.
    case noFault(String)
    /// A fault rule with this id exists already.
    case faultExists(String)
    /// The fault book holds its maximum of rules (SPEC §6): nothing was added.
    case faultLimit(Int)
    /// The queue's store cannot be read or written now (the PostgreSQL store's database is
    /// away): nothing was changed, and nothing is said about the operations.
    case storeUnavailable(String)

    /// The table: one code per case; the code has the status (`ErrorCode`).
    package var code: ErrorCode {
        switch self {
        case .invalid: .badRequest
        case .tokenRequired: .unauthorized
        case .notLoopback, .proxied, .foreignHost, .crossSiteOrigin: .forbidden
        case .noEndpoint, .noOperation, .noFault: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .notRetryable, .faultExists: .conflict
        case .faultLimit: .faultLimit
        case .storeUnavailable: .storeUnavailable
        }
    }

    package var status: Int { code.status }

    package var message: String {
        switch self {
        case .invalid(let field, let expected, let got):
            "\(field): expected \(expected)" + (got.map { ", got \"\($0)\"" } ?? "")
        case .tokenRequired: "admin requests need Authorization: Bearer <admin.token>"
        case .notLoopback: "without admin.token the admin API answers loopback clients only"
        case .proxied: "without admin.token the admin API answers loopback clients only, not requests that came through a proxy (Via or Forwarded)"
        case .foreignHost(let host): "Host \(host) is not localhost, a 127.x.x.x or [::1] literal, or the listen address"
        case .crossSiteOrigin(let origin): "cross-site admin request from Origin \(origin)"
        case .noEndpoint(let method, let path): "no admin endpoint \(method) \(path)"
        case .noOperation(let id): "no operation \(id)"
        case .noFault(let id): "no fault rule \(id)"
        case .faultExists(let id): "a fault rule with id \(id) exists; remove it first or choose another id"
        case .faultLimit(let limit): "at most \(limit) fault rules; remove some first (DELETE /admin/faults/{id} or /admin/faults)"
        case .methodNotAllowed(let allow): "use \(allow.joined(separator: ", "))"
        case .notRetryable(let id, let status):
            "operation \(id) is \(status.rawValue); only failed, conflict and pending operations can be retried"
        case .storeUnavailable(let reason): "the queue's store is unavailable, try again shortly: \(reason)"
        }
    }

    /// Headers the answer must carry for a client to recover: the scheme to authenticate with
    /// (RFC 9110 §15.5.2 requires it on a 401), the methods to use instead (§15.5.6, on a 405).
    package var headers: [(String, String)] {
        switch self {
        case .tokenRequired: [("WWW-Authenticate", "Bearer")]
        case .methodNotAllowed(let allow): [("Allow", allow.joined(separator: ", "))]
        // Every 503 says when to come back, as the proxy's do.
        case .storeUnavailable: [("Retry-After", "1")]
        default: []
        }
    }

    /// The answer: the error envelope with this case's status, code, message and headers.
    package var response: AdminResponse {
        var response = AdminResponse.error(code, message)
        response.extraHeaders = headers
        return response
    }
}

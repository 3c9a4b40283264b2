/// Where a request goes: scheme, host and port. Pools and reachability are keyed by it.
public struct Origin: Hashable, Sendable, CustomStringConvertible {
    public enum Scheme: String, Sendable { case http, https }
    public let scheme: Scheme
    public let host: String
    public let port: Int
    /// `host[:port]` as sent in `Host`, the port omitted when it is the scheme's default.
    /// Computed once: it goes into every forwarded request.
    public let authority: String

    public init(scheme: Scheme, host: String, port: Int) {
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
        let defaultPort = scheme == .https ? 443 : 80
        let bracketed = host.utf8.contains(UInt8(ascii: ":")) && !host.hasPrefix("[") ? "[\(self.host)]" : self.host
        authority = port == defaultPort ? bracketed : "\(bracketed):\(port)"
    }

    public static func == (lhs: Origin, rhs: Origin) -> Bool {
        lhs.port == rhs.port && lhs.scheme == rhs.scheme && lhs.host == rhs.host
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(host)
        hasher.combine(port)
    }

    public var description: String { "\(scheme.rawValue)://\(authority)" }
}

/// Why an upstream exchange failed, split by whether the request may have reached the origin.
///
/// The queue (a later layer) relies on the split: a request that was `neverSent` can be stored
/// and replayed with no risk of a double delivery; one that was sent may have been processed.
public enum UpstreamError: Error, Sendable, Equatable {
    /// Connecting failed (refused, unreachable, DNS, connect timeout): nothing was sent.
    case connectFailed(String)
    /// The TLS handshake failed or timed out (a refused certificate, a protocol error, a
    /// captive portal): nothing of the request was sent.
    case tlsFailed(String)
    /// The request was (at least partly) sent, and the connection ended before a complete response head.
    case noResponse(String, retryable: Bool)
    /// No response head within `responseTimeoutSeconds`.
    case responseTimeout
    /// The origin sent bytes that are not a valid HTTP/1.1 response.
    case invalidResponse(String)
    /// The connection ended in the middle of a response body that was already being relayed.
    case truncated(String)
    /// Outbox would not connect: the target resolves to one of its own listeners, or to an
    /// address the allowed-host rules keep it from (SPEC §3). Nothing was sent, and the
    /// origin is not unreachable: it is neither marked offline nor stored for later.
    case targetRefused(TargetRefusal)

    /// Why a resolved target is refused; each carries the address it resolved to (`ADDR:PORT`).
    public enum TargetRefusal: Sendable, Equatable {
        /// One of Outbox's own listeners (the main one or `admin.listen`): a forwarding loop.
        case ownListener(address: String)
        /// A loopback, link-local or unspecified address, reached only through a wildcard
        /// entry of `allowedHosts` while `listen` is not loopback.
        case internalAddress(address: String)
    }

    /// Outbox itself could not get what the exchange needs (a socket: `EMFILE`, `ENFILE`,
    /// `ENOBUFS`, `ENOMEM`): nothing was sent, and the origin is not to blame (SPEC §6). The
    /// text is the failed call and errno, `socket: Too many open files`.
    case localResourcesExhausted(String)

    /// Whether the origin counts as offline: refused/unresolvable, dropped before a complete
    /// head, or no head in time.
    public var meansUnreachable: Bool {
        switch self {
        case .connectFailed, .tlsFailed, .noResponse, .responseTimeout: true
        case .invalidResponse, .truncated, .targetRefused, .localResourcesExhausted: false
        }
    }

    /// True when the origin never received any byte of the request.
    public var neverSent: Bool {
        switch self {
        case .connectFailed, .tlsFailed, .targetRefused, .localResourcesExhausted: true
        default: false
        }
    }

    public var summary: String {
        switch self {
        case .connectFailed(let reason): "connect failed: \(reason)"
        case .tlsFailed(let reason): "tls: \(reason)"
        case .noResponse(let reason, _): "no response: \(reason)"
        case .responseTimeout: "response timeout"
        case .invalidResponse(let reason): "invalid response: \(reason)"
        case .truncated(let reason): "response truncated: \(reason)"
        case .targetRefused(.ownListener(let address)): "refused: the target resolves to \(address), Outbox's own listener"
        case .targetRefused(.internalAddress(let address)): "refused: the target resolves to the internal address \(address)"
        case .localResourcesExhausted(let reason): "local resources exhausted: \(reason)"
        }
    }
}

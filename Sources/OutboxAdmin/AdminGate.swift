import OutboxConfig
import OutboxHTTP
import OutboxModel

/// Who may use the admin API: a bearer token when one is set, else loopback peers
/// only; and never a browser on another site (`Origin`) or a DNS-rebound name (`Host`).
package struct AdminGate: Sendable {
    let token: [UInt8]?
    let listenHost: String

    /// The Host check accepts the configured address of the listener that serves the API.
    package init(config: OutboxConfig) {
        token = config.admin.token.map { Array($0.utf8) }
        listenHost = (config.admin.listen ?? config.listen).host
    }

    /// The path below `prefix` (`/status?x`), or nil when `target` is not an admin target.
    package static func subpath(of target: String, prefix: String) -> String? {
        guard target.hasPrefix(prefix) else { return nil }
        let rest = target.dropFirst(prefix.count)
        if rest.isEmpty { return "/" }
        guard let first = rest.first, first == "/" || first == "?" else { return nil }
        return first == "?" ? "/" + rest : String(rest)
    }

    /// The refusal for this request, or nil when it may proceed.
    package func refusal(for head: HTTPRequestHead, peerIsLoopback: Bool) -> AdminResponse? {
        denial(for: head, peerIsLoopback: peerIsLoopback)?.response
    }

    /// Why this request may not proceed, as a case of the admin error table; nil when it may.
    func denial(for head: HTTPRequestHead, peerIsLoopback: Bool) -> AdminError? {
        if let token {
            guard let header = head.headers.first("Authorization"), header.hasPrefix("Bearer "),
                  AdminGate.constantTimeEquals(Array(header.utf8.dropFirst(7)), token) else {
                return .tokenRequired
            }
        } else if !peerIsLoopback {
            return .notLoopback
        }
        let host = head.headers.first("Host") ?? ""
        guard hostIsOurs(host) else { return .foreignHost(host) }
        if let origin = head.headers.first("Origin"), origin != "http://\(host)" {
            return .crossSiteOrigin(origin)
        }
        return nil
    }

    private func hostIsOurs(_ host: String) -> Bool {
        guard let (name, _) = Origin.parseAuthority(host, defaultPort: 80) else { return false }
        let lower = name.lowercased()
        return lower == "localhost" || lower == "::1" || lower.hasPrefix("127.") || lower == listenHost.lowercased()
    }

    /// Compares without an early exit, so response timing does not reveal the token.
    static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        for index in 0..<max(a.count, b.count) {
            let x = index < a.count ? a[index] : 0
            let y = index < b.count ? b[index] : 0
            difference |= x ^ y
        }
        return difference == 0
    }
}

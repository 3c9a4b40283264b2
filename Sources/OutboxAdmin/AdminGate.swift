import OutboxConfig
import OutboxHTTP
import OutboxModel

/// Who may use the admin API (SPEC §5): a bearer token when one is set, else loopback peers
/// whose request came straight from them (no `Via`/`Forwarded`: through a proxy, the peer
/// says nothing about the sender); and never a browser on another site (`Origin`) or a
/// DNS-rebound name (`Host`).
package struct AdminGate: Sendable {
    let token: [UInt8]?
    /// The configured host of the listener that serves the API, as the Host check compares it
    /// (lowercased, IPv6 without brackets).
    let listenHost: String

    /// The Host check accepts the configured address of the listener that serves the API.
    package init(config: OutboxConfig) {
        token = config.admin.token.map { Array($0.utf8) }
        listenHost = (config.admin.listen ?? config.listen).host.lowercased()
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
        } else if head.headers.contains("Via") || head.headers.contains("Forwarded") {
            // A proxy on this machine (Outbox itself, forwarding to its own port) makes every
            // sender a loopback peer.
            return .proxied
        }
        let host = head.headers.first("Host") ?? ""
        guard namesThisProxy(host) else { return .foreignHost(host) }
        // A browser's page may call only from the proxy's own address: `http://` and the Host.
        if let origin = head.headers.first("Origin") {
            let authority = origin.prefix(7).lowercased() == "http://" ? String(origin.dropFirst(7)) : ""
            guard namesThisProxy(authority), authority.lowercased() == host.lowercased() else {
                return .crossSiteOrigin(origin)
            }
        }
        return nil
    }

    /// Whether `authority` (a `Host` value, or an `Origin` without its scheme) is, exactly,
    /// `localhost`, a dotted-quad IPv4 literal in 127.0.0.0/8, `[::1]` or the configured
    /// listen address, each with an optional port. Exact syntax, not a prefix: a page that
    /// rebinds `127.attacker.example`, `localhost.attacker.example` or `127.0.0.1.nip.io` to
    /// 127.0.0.1 sends that name as its Host, and `0x7f.1` or `127.1` are not literals that a
    /// browser writes (it would send them as `127.0.0.1`).
    func namesThisProxy(_ authority: String) -> Bool {
        guard let (host, port) = HostSyntax.splitHostPort(Substring(authority), portRequired: false) else { return false }
        if let port, HostSyntax.port(port, in: 1...65535) == nil { return false }
        let name = host.lowercased()
        if name == "localhost" || name == listenHost { return true }
        // splitHostPort took brackets off: only `[::1]` is an IPv6 host here.
        if name.contains(":") { return name == "::1" && authority.hasPrefix("[") }
        return HostSyntax.isIPv4(name) && name.hasPrefix("127.")
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

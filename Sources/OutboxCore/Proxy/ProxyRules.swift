/// Where a request goes, decided from its target before anything is forwarded (SPEC §3).
enum Route: Equatable {
    /// Forward to `origin` with origin-form `target`.
    case origin(Origin, target: String, forwardMode: Bool)
    /// `CONNECT host:port`.
    case tunnel(host: String, port: Int)
}

/// The proxy's header and routing rules as pure functions: what is hop-by-hop, which forwarding
/// headers are added, where a request target points. Tests drive them with plain values.
enum ProxyRules {
    /// RFC 9110 §7.6.1 plus the de-facto `Proxy-Connection`; `Proxy-Authorization` is for us,
    /// never for the origin. Lowercased.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
        "te", "trailer", "transfer-encoding", "upgrade",
    ]

    static let via = "1.1 outbox"

    /// Every hop-by-hop name for this message: the fixed list and each token that `Connection`
    /// names (RFC 9110 §7.6.1; Go's reverseproxy does the same on both directions).
    static func hopByHopNames(of headers: HTTPHeaders) -> Set<String> {
        let named = headers.tokens("Connection")
        if named.isEmpty { return hopByHop }
        return hopByHop.union(named)
    }

    /// Routes a request; errors carry the status the client gets.
    static func route(_ head: HTTPRequestHead, upstream: UpstreamURL?,
                      forwardProxy: OutboxConfig.ForwardProxy) -> Result<Route, ProxyError> {
        if head.method == "CONNECT" {
            guard forwardProxy.enabled else { return .failure(.forbidden("forward proxying is disabled")) }
            guard let (host, port) = parseAuthority(head.target, defaultPort: nil) else {
                return .failure(.badRequest("CONNECT needs host:port, got \(head.target)"))
            }
            guard forwardProxy.connectPorts.contains(port) else {
                return .failure(.forbidden("CONNECT to port \(port) is not allowed (forwardProxy.connectPorts)"))
            }
            guard hostAllowed(host, forwardProxy.allowedHosts) else {
                return .failure(.forbidden("host \(host) is not in forwardProxy.allowedHosts"))
            }
            return .success(.tunnel(host: host, port: port))
        }
        if head.target.hasPrefix("/") || head.target == "*" {
            guard let upstream else {
                return .failure(.noUpstream)
            }
            let target = head.target == "*" ? (upstream.basePath.isEmpty ? "*" : upstream.basePath) : upstream.basePath + head.target
            return .success(.origin(upstream.origin, target: target, forwardMode: false))
        }
        guard let (origin, target) = parseAbsolute(head.target) else {
            return .failure(.badRequest("request target is not origin-form or an http(s) URL: \(head.target)"))
        }
        guard forwardProxy.enabled else { return .failure(.forbidden("forward proxying is disabled")) }
        guard hostAllowed(origin.host, forwardProxy.allowedHosts) else {
            return .failure(.forbidden("host \(origin.host) is not in forwardProxy.allowedHosts"))
        }
        return .success(.origin(origin, target: target, forwardMode: true))
    }

    /// `host`, `*.suffix` (any subdomain of suffix) or `*`; case-insensitive.
    static func hostAllowed(_ host: String, _ allowed: [String]) -> Bool {
        let host = host.lowercased()
        for entry in allowed {
            let entry = entry.lowercased()
            if entry == "*" || entry == host { return true }
            if entry.hasPrefix("*."), host.hasSuffix(entry.dropFirst()) { return true }
        }
        return false
    }

    /// `http://host[:port][/path][?query]` → origin and origin-form target (RFC 9112 §3.2.2).
    static func parseAbsolute(_ target: String) -> (Origin, String)? {
        let lower = target.prefix(8).lowercased()
        let scheme: Origin.Scheme
        let rest: Substring
        if lower.hasPrefix("http://") {
            scheme = .http
            rest = target.dropFirst(7)
        } else if lower.hasPrefix("https://") {
            scheme = .https
            rest = target.dropFirst(8)
        } else {
            return nil
        }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        // userinfo in a request target is deprecated and a phishing vector (RFC 9110 §4.2.4).
        if authority.contains("@") || authority.isEmpty { return nil }
        guard let (host, port) = parseAuthority(String(authority), defaultPort: scheme == .https ? 443 : 80) else { return nil }
        var path = String(rest[authorityEnd...])
        if path.contains("#") { return nil }
        if path.isEmpty { path = "/" } else if path.hasPrefix("?") { path = "/" + path }
        return (Origin(scheme: scheme, host: host, port: port), path)
    }

    /// `host:port`, `[v6]:port`, or a bare host when `defaultPort` is given.
    static func parseAuthority(_ text: String, defaultPort: Int?) -> (String, Int)? {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty { return nil }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        } else {
            host = Substring(text)
        }
        guard !host.isEmpty, host.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "/" }) else { return nil }
        let port: Int
        if let portText, !portText.isEmpty {
            guard portText.allSatisfy(\.isASCII), let value = Int(portText), (1...65535).contains(value) else { return nil }
            port = value
        } else if let defaultPort {
            port = defaultPort
        } else {
            return nil
        }
        return (String(host), port)
    }

    /// The request head sent upstream: origin-form target, `Host` first, hop-by-hop and
    /// `Expect` removed (the proxy answers `100 Continue` itself), `Via` and `X-Forwarded-*`
    /// added, body framing re-declared for the upstream hop.
    static func upstreamRequestHead(_ head: HTTPRequestHead, origin: Origin, target: String,
                                    clientAddress: String, bodyFraming: HTTPBodyFraming) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.add("Host", origin.authority)
        let originalHost = head.headers.first("Host")
        var existingForwardedFor: [String] = []
        let drop = hopByHopNames(of: head.headers)
        for (name, value) in head.headers {
            let lower = name.lowercased()
            if drop.contains(lower) { continue }
            switch lower {
            case "host", "expect", "x-forwarded-proto", "x-forwarded-host": continue
            case "x-forwarded-for": existingForwardedFor.append(value)
            default: headers.add(name, value)
            }
        }
        if bodyFraming == .chunked { headers.add("Transfer-Encoding", "chunked") }
        headers.add("Via", via)
        // Appended with ", " to what the client sent, as Go's reverseproxy does.
        existingForwardedFor.append(clientAddress)
        headers.add("X-Forwarded-For", existingForwardedFor.joined(separator: ", "))
        headers.add("X-Forwarded-Proto", "http")
        if let originalHost { headers.add("X-Forwarded-Host", originalHost) }
        return HTTPRequestHead(method: head.method, target: target, version: .http1_1, headers: headers)
    }

    /// The response head sent to the client: hop-by-hop removed, `Via` added; the caller adds
    /// framing and `Connection` for the client hop.
    static func clientResponseHead(_ head: HTTPResponseHead) -> HTTPResponseHead {
        var result = head
        result.version = .http1_1
        result.headers.removeAll(lowercasedNames: hopByHopNames(of: head.headers))
        result.headers.add("Via", via)
        return result
    }
}

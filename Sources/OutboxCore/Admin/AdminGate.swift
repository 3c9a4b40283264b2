/// Who may use the admin API: a bearer token when one is set, else loopback peers
/// only; and never a browser on another site (`Origin`) or a DNS-rebound name (`Host`).
struct AdminGate: Sendable {
    let token: [UInt8]?
    let listenHost: String

    /// The path below `prefix` (`/status?x`), or nil when `target` is not an admin target.
    static func subpath(of target: String, prefix: String) -> String? {
        guard target.hasPrefix(prefix) else { return nil }
        let rest = target.dropFirst(prefix.count)
        if rest.isEmpty { return "/" }
        guard let first = rest.first, first == "/" || first == "?" else { return nil }
        return first == "?" ? "/" + rest : String(rest)
    }

    /// `/operations?status=failed&limit=2` → path and decoded query parameters.
    static func split(_ subpath: String) -> (String, [String: String]) {
        guard let mark = subpath.firstIndex(of: "?") else { return (subpath, [:]) }
        var query: [String: String] = [:]
        for pair in subpath[subpath.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(parts[0]).removingPercentEncodingOrSelf
            query[key] = parts.count > 1 ? String(parts[1]).replacingPlus.removingPercentEncodingOrSelf : ""
        }
        return (String(subpath[..<mark]), query)
    }

    /// Whether the answer to an admin request, its refusal included, is pretty JSON: for
    /// `?pretty`, and for curl (`User-Agent: curl/…`), which people read in a terminal;
    /// scripts and browsers get it compact.
    static func rendersPretty(_ head: HTTPRequestHead, query: [String: String]) -> Bool {
        query["pretty"] != nil || (head.headers.first("User-Agent")?.hasPrefix("curl/") ?? false)
    }

    /// The refusal for this request, or nil when it may proceed.
    func refusal(for head: HTTPRequestHead, peerIsLoopback: Bool) -> AdminAPI.Response? {
        let api = AdminAPI.errorResponse
        if let token {
            guard let header = head.headers.first("Authorization"), header.hasPrefix("Bearer "),
                  AdminGate.constantTimeEquals(Array(header.utf8.dropFirst(7)), token) else {
                var response = api(401, "unauthorized", "admin requests need Authorization: Bearer <admin.token>")
                response.extraHeaders = [("WWW-Authenticate", "Bearer")]
                return response
            }
        } else if !peerIsLoopback {
            return api(403, "forbidden", "without admin.token the admin API answers loopback clients only")
        }
        let host = head.headers.first("Host") ?? ""
        guard hostIsOurs(host) else {
            return api(403, "forbidden", "Host \(host) is not a loopback name or the listen address")
        }
        if let origin = head.headers.first("Origin"), origin != "http://\(host)" {
            return api(403, "forbidden", "cross-site admin request from Origin \(origin)")
        }
        return nil
    }

    private func hostIsOurs(_ host: String) -> Bool {
        guard let (name, _) = ProxyRules.parseAuthority(host, defaultPort: 80) else { return false }
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

private extension String {
    var replacingPlus: String { String(map { $0 == "+" ? " " : $0 }) }
    var removingPercentEncodingOrSelf: String {
        var bytes: [UInt8] = []
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
               let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) {
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Request-target syntax (RFC 9112 §3.2): the proxy routes by it, the queue filters by it,
/// the admin gate checks `Host` with it, so it lives beside `Origin`.
extension Origin {
    /// `http://host[:port][/path][?query]` → origin and origin-form target (RFC 9112 §3.2.2).
    package static func parseAbsolute(_ target: String) -> (Origin, String)? {
        guard let (scheme, authority) = absoluteAuthority(target) else { return nil }
        // userinfo in a request target is deprecated and a phishing vector (RFC 9110 §4.2.4).
        if authority.contains("@") || authority.isEmpty { return nil }
        guard let (host, port) = parseAuthority(String(authority), defaultPort: scheme == .https ? 443 : 80) else { return nil }
        var path = String(target[authority.endIndex...])
        if path.contains("#") { return nil }
        if path.isEmpty { path = "/" } else if path.hasPrefix("?") { path = "/" + path }
        return (Origin(scheme: scheme, host: host, port: port), path)
    }

    /// The scheme and the authority text of an `http://` or `https://` target, exactly as the
    /// client wrote it (not checked); nil for any other form.
    package static func absoluteAuthority(_ target: String) -> (Origin.Scheme, Substring)? {
        // Every forwarded head asks: answer origin-form ("/…") without making a String.
        guard let first = target.utf8.first, first | 0x20 == UInt8(ascii: "h") else { return nil }
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
        return (scheme, rest[..<authorityEnd])
    }

    /// `host:port`, `[v6]:port`, or a bare host when `defaultPort` is given.
    package static func parseAuthority(_ text: String, defaultPort: Int?) -> (String, Int)? {
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
}

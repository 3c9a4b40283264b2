import OutboxModel

/// An upstream origin URL: scheme http|https, host, port (default 80/443), base path ("" or
/// "/prefix", no trailing slash, no query/fragment).
///
/// Parsing lowercases the scheme and host (both are case-insensitive, RFC 3986 §3.1, §3.2.2)
/// so that two spellings of one origin compare equal; the base path is kept byte for byte.
public struct UpstreamURL: Sendable, Equatable, CustomStringConvertible {
    /// The two schemes Outbox can speak to an upstream.
    public enum Scheme: String, Sendable {
        case http, https

        /// 80 for http, 443 for https.
        public var defaultPort: Int {
            switch self {
            case .http: 80
            case .https: 443
            }
        }
    }

    /// The scheme, which also selects plain TCP or TLS.
    public var scheme: Scheme
    /// A lowercased DNS name or IPv4 address, or an unbracketed IPv6 address.
    public var host: String
    /// 1...65535; the scheme's default when the URL names none.
    public var port: Int
    /// "" or a path starting with "/" and not ending with "/", prepended to every request target.
    public var basePath: String

    /// Builds a URL from parts without checking them; use `parse` for user input.
    public init(scheme: Scheme, host: String, port: Int, basePath: String = "") {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.basePath = basePath
    }

    /// "host:port" as it goes in a Host header (port omitted when default for the scheme; IPv6 bracketed).
    public var authority: String {
        let host = HostSyntax.bracketed(host)
        return port == scheme.defaultPort ? host : "\(host):\(port)"
    }

    /// The URL in canonical form (`http://example.com/api`); `parse(description)` gives back `self`.
    public var description: String {
        "\(scheme.rawValue)://\(authority)\(basePath)"
    }

    /// Parses `http[s]://host[:port][/path]`; nil for other schemes, user info (`user@`), a
    /// query or fragment, port 0 or out of range, an invalid host, or a path with spaces,
    /// control or non-ASCII bytes. Trailing slashes of the path are dropped ("/" becomes "").
    public static func parse(_ text: String) -> UpstreamURL? {
        guard let separator = text.firstRange(of: "://"),
              let scheme = Scheme(rawValue: text[..<separator.lowerBound].lowercased())
        else { return nil }
        let rest = text[separator.upperBound...]
        guard !rest.contains("?"), !rest.contains("#") else { return nil }
        let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<pathStart]
        // Credentials in the URL would end up in logs and `check-config` output.
        guard !authority.contains("@"),
              let (host, portText) = HostSyntax.splitHostPort(authority, portRequired: false)
        else { return nil }
        var port = scheme.defaultPort
        if let portText {
            guard let explicit = HostSyntax.port(portText, in: 1...65535) else { return nil }
            port = explicit
        }
        var path = rest[pathStart...]
        guard path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        while path.hasSuffix("/") { path = path.dropLast() }
        return UpstreamURL(scheme: scheme, host: host.lowercased(), port: port, basePath: String(path))
    }
}

extension UpstreamURL {
    /// The origin (scheme, host, port) the URL names; the base path is not part of it.
    public var origin: Origin {
        Origin(scheme: scheme == .https ? .https : .http, host: host, port: port)
    }
}

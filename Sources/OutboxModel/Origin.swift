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

import OutboxModel

/// Host and port to listen on or connect to. Parses "127.0.0.1:8080", "[::1]:8080", "localhost:0".
///
/// `host` is stored without brackets (`::1`), ready for `getaddrinfo`; `description` puts them
/// back. Port 0 is allowed: for a listener it means "pick a free port".
public struct SocketAddressSpec: Sendable, Equatable, CustomStringConvertible {
    /// A DNS name, a dotted-quad IPv4 address or an unbracketed IPv6 address.
    public var host: String
    /// 0...65535.
    public var port: Int

    /// Builds a spec from parts without checking them; use `parse` for user input.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT` where HOST is a name, an IPv4 address or a bracketed IPv6 address and
    /// PORT is 0...65535 in decimal; nil for anything else (missing port, empty host, `::1:80`).
    public static func parse(_ text: String) -> SocketAddressSpec? {
        guard let (host, portText) = HostSyntax.splitHostPort(text[...], portRequired: true),
              let portText, let port = HostSyntax.port(portText, in: 0...65535)
        else { return nil }
        return SocketAddressSpec(host: host, port: port)
    }

    /// `host:port`, with IPv6 hosts in brackets; `parse(description)` gives back `self`.
    public var description: String {
        "\(HostSyntax.bracketed(host)):\(port)"
    }
}

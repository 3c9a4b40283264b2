import Glibc

/// Syntax checks for the host part of addresses and URLs, shared by `SocketAddressSpec`,
/// `UpstreamURL`, `forwardProxy.allowedHosts` and the names interception certificates are
/// minted for, so all of them accept exactly the same hosts.
package enum HostSyntax {
    /// A DNS name (labels of letters, digits, `-` and `_`, at most 63 bytes each, 253 in all)
    /// or a dotted-quad IPv4 address. Names whose last label is numeric must be a valid IPv4
    /// address: resolvers would otherwise read "10.1" or "999.1.1.1" in surprising ways.
    package static func isNameOrIPv4(_ text: some StringProtocol) -> Bool {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 253 else { return false }
        let labels = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        for label in labels {
            guard !label.isEmpty, label.count <= 63, label.allSatisfy(isLabelByte) else { return false }
        }
        if let last = labels.last, last.allSatisfy(isDigit) {
            return isIPv4(text)
        }
        return true
    }

    /// A dotted-quad IPv4 address, as `inet_pton` reads it (no octal, no short forms).
    package static func isIPv4(_ text: some StringProtocol) -> Bool {
        var address = in_addr()
        return inet_pton(AF_INET, String(text), &address) == 1
    }

    /// An IPv6 address without brackets, as `inet_pton` reads it (zone ids are not accepted).
    package static func isIPv6(_ text: some StringProtocol) -> Bool {
        var address = in6_addr()
        return inet_pton(AF_INET6, String(text), &address) == 1
    }

    /// Parses decimal port digits: 1 to 5 ASCII digits whose value is in `range`.
    package static func port(_ text: some StringProtocol, in range: ClosedRange<Int>) -> Int? {
        let bytes = Array(text.utf8)
        guard (1...5).contains(bytes.count), bytes.allSatisfy(isDigit) else { return nil }
        let value = bytes.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        return range.contains(value) ? value : nil
    }

    /// Splits `host:port` or `[v6]:port` (port optional when `portRequired` is false) into an
    /// unbracketed host and the port text; nil when the shape or the host is invalid.
    package static func splitHostPort(_ text: Substring, portRequired: Bool) -> (host: String, port: Substring?)? {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let host = text[text.index(after: text.startIndex)..<close]
            guard isIPv6(host) else { return nil }
            let rest = text[text.index(after: close)...]
            if rest.isEmpty { return portRequired ? nil : (String(host), nil) }
            guard rest.hasPrefix(":") else { return nil }
            return (String(host), rest.dropFirst())
        }
        guard let colon = text.lastIndex(of: ":") else {
            guard !portRequired, isNameOrIPv4(text) else { return nil }
            return (String(text), nil)
        }
        let host = text[..<colon]
        // An unbracketed IPv6 literal would be ambiguous with the port separator.
        guard !host.contains(":"), isNameOrIPv4(host) else { return nil }
        return (String(host), text[text.index(after: colon)...])
    }

    /// A host as host patterns compare it: lowercased, IPv6 without brackets, one trailing dot
    /// dropped (`API.Example.com.` and `api.example.com` are one name). `allowedHosts` matching
    /// and the pool's check of names allowed to reach internal addresses both use it.
    package static func matchingForm(_ host: String) -> String {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        return name
    }

    /// The host as it is written inside a URL authority or `host:port`: IPv6 gets brackets.
    package static func bracketed(_ host: String) -> String {
        host.contains(":") ? "[\(host)]" : host
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private static func isLabelByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default:
            false
        }
    }
}

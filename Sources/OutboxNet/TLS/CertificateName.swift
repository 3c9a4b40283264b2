import Glibc
import OutboxModel

/// What a leaf certificate of the interception CA is for: a DNS host name or an IP address,
/// in one canonical form, so that `API.example.com.` and `api.example.com` (or two spellings
/// of one IPv6 address) share a certificate and a cache entry.
package enum CertificateName: Hashable, Sendable, CustomStringConvertible {
    /// Lowercased, without a trailing dot.
    case dns(String)
    /// The address's 4 (IPv4) or 16 (IPv6) bytes, in network order.
    case ip([UInt8])

    /// Reads a host as a client names it (SNI, the `CONNECT` authority): an IPv4 or IPv6
    /// literal (brackets allowed), else a host name as the config accepts them (`HostSyntax`:
    /// letters, digits, `-` and `_` in labels of at most 63 bytes, 253 in all, a numeric last
    /// label only in an IPv4 address), one trailing dot ignored. nil for anything else.
    package init?(_ text: some StringProtocol) {
        var host = String(text)
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if let address = Self.addressBytes(host) {
            self = .ip(address)
            return
        }
        if host.hasSuffix(".") { host.removeLast() }
        guard HostSyntax.isNameOrIPv4(host) else { return nil }
        self = .dns(host.lowercased())
    }

    /// The name as certificates and messages show it (an IPv6 address in its RFC 5952 form).
    package var description: String {
        switch self {
        case .dns(let name):
            return name
        case .ip(let bytes):
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            let family = bytes.count == 4 ? AF_INET : AF_INET6
            _ = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
            return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// An IPv4 or IPv6 literal's bytes, as `inet_pton` reads it; nil for anything else.
    static func addressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}

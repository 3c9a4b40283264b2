import OutboxModel

/// The names a CA may vouch for: an X.509 nameConstraints extension (RFC 5280 §4.2.1.10)
/// as plain values, with the matching rules OpenSSL applies, so Outbox can say before any
/// handshake whether a CA it holds can serve a host pattern.
///
/// DNS subtrees match as OpenSSL, Go, NSS and BoringSSL match them: `example.com` matches
/// the name itself and every name under it, `.example.com` only the names under it, and the
/// empty name every name. An IP subtree is an address with a mask (8 bytes for IPv4, 32 for
/// IPv6). A name is permitted when, for its kind, there is no permitted subtree at all or one
/// matches it, and no excluded subtree matches it.
package struct NameConstraints: Equatable, Sendable {
    package var permittedDNS: [String] = []
    package var excludedDNS: [String] = []
    /// Address followed by mask.
    package var permittedIP: [[UInt8]] = []
    package var excludedIP: [[UInt8]] = []

    package init(permittedDNS: [String] = [], excludedDNS: [String] = [], permittedIP: [[UInt8]] = [],
                 excludedIP: [[UInt8]] = []) {
        self.permittedDNS = permittedDNS
        self.excludedDNS = excludedDNS
        self.permittedIP = permittedIP
        self.excludedIP = excludedIP
    }

    /// The constraints of a CA that vouches for exactly the hosts `patterns` match (the
    /// `allowedHosts` syntax: a name, an IP address, `*.suffix`, `*`), or nil when that cannot
    /// be said: a `*` among them, or a pattern that is none of these.
    ///
    /// - a name `h` permits `h`, and excludes `.h` (its subdomains, which a DNS subtree would
    ///   cover too) unless another pattern wants names under `h`;
    /// - `*.s` permits `.s`: the names under `s`, not `s` itself, as the pattern matches;
    /// - an address permits itself alone (/32, /128);
    /// - a kind no pattern asks for is excluded whole (the empty DNS name; `0.0.0.0/0`,
    ///   `::/0`), as the CA/Browser Forum requires of constrained CAs: a verifier permits every
    ///   name of a kind the extension does not mention.
    package init?(interceptPatterns patterns: [String]) {
        var names: [String] = []
        var suffixes: [String] = []
        var addresses: [[UInt8]] = []
        for pattern in patterns {
            let lowered = pattern.lowercased()
            if lowered.hasPrefix("*.") {
                guard let suffix = Self.wildcardSuffix(lowered) else { return nil }
                suffixes.append(suffix)
            } else {
                switch CertificateName(lowered) {
                case .dns(let name)?: names.append(name)
                case .ip(let bytes)?: addresses.append(bytes)
                case nil: return nil  // `*`, or not a host at all
                }
            }
        }
        for name in Self.unique(names) {
            permittedDNS.append(name)
            let wantsNamesBelow = suffixes.contains { $0 == name || Self.isBelow($0, name) || Self.isBelow(name, $0) }
                || names.contains { Self.isBelow($0, name) }
            if !wantsNamesBelow { excludedDNS.append("." + name) }
        }
        permittedDNS += Self.unique(suffixes).map { "." + $0 }
        for address in Self.unique(addresses) {
            permittedIP.append(address + [UInt8](repeating: 0xff, count: address.count))
        }
        if permittedDNS.isEmpty { excludedDNS.append("") }
        if !addresses.contains(where: { $0.count == 4 }) { excludedIP.append([UInt8](repeating: 0, count: 8)) }
        if !addresses.contains(where: { $0.count == 16 }) { excludedIP.append([UInt8](repeating: 0, count: 32)) }
    }

    /// Whether a leaf for `name` would pass these constraints.
    package func permits(_ name: CertificateName) -> Bool {
        switch name {
        case .dns(let host):
            return (permittedDNS.isEmpty || permittedDNS.contains { Self.dns($0, matches: host) })
                && !excludedDNS.contains { Self.dns($0, matches: host) }
        case .ip(let address):
            return (permittedIP.isEmpty || permittedIP.contains { Self.ip($0, contains: address) })
                && !excludedIP.contains { Self.ip($0, contains: address) }
        }
    }

    /// Whether every host the intercept pattern matches would pass: for `*.s`, every name
    /// under `s`; `*` never passes (some name is always outside a constraint).
    package func permits(pattern: String) -> Bool {
        let lowered = pattern.lowercased()
        guard lowered.hasPrefix("*.") else {
            guard let name = CertificateName(lowered) else { return false }
            return permits(name)
        }
        guard let suffix = Self.wildcardSuffix(lowered) else { return false }
        return (permittedDNS.isEmpty || permittedDNS.contains { Self.dns($0, coversEveryNameBelow: suffix) })
            && !excludedDNS.contains { $0.isEmpty || Self.dns($0, coversEveryNameBelow: suffix) || Self.isBelow($0, suffix) }
    }

    /// The `suffix` of a lowercased `*.suffix`, as the config accepts it (`HostSyntax`), one
    /// trailing dot dropped. A dotted-quad suffix (`*.10.0.0.1`) is kept as a DNS suffix: it
    /// matches no host name, which is what the pattern matches, so it can never widen a CA.
    static func wildcardSuffix(_ pattern: String) -> String? {
        var suffix = String(pattern.dropFirst(2))
        if suffix.hasSuffix(".") { suffix.removeLast() }
        return HostSyntax.isNameOrIPv4(suffix) ? suffix : nil
    }

    /// OpenSSL's `nc_dns`: the base is a suffix of the name on a label boundary (or starts
    /// with a dot), compared without case.
    static func dns(_ base: String, matches name: String) -> Bool {
        if base.isEmpty { return true }
        let base = Array(base.lowercased().utf8)
        let name = Array(name.lowercased().utf8)
        guard name.count >= base.count else { return false }
        let tail = name[(name.count - base.count)...]
        guard tail.elementsEqual(base) else { return false }
        return name.count == base.count || base.first == UInt8(ascii: ".") || name[name.count - base.count - 1] == UInt8(ascii: ".")
    }

    /// Whether `base` matches every name under `suffix` (`x.suffix`, `a.b.suffix`, ...).
    static func dns(_ base: String, coversEveryNameBelow suffix: String) -> Bool {
        base.isEmpty || base == suffix || base == "." + suffix || (suffix.utf8.count > base.utf8.count && dns(base, matches: suffix))
    }

    /// Whether `name` (or subtree `.name`) lies strictly under `ancestor`.
    static func isBelow(_ name: String, _ ancestor: String) -> Bool {
        name.hasSuffix("." + ancestor)
    }

    /// OpenSSL's `nc_ip`: same family, and equal under the mask.
    static func ip(_ subtree: [UInt8], contains address: [UInt8]) -> Bool {
        guard subtree.count == address.count * 2 else { return false }
        return address.indices.allSatisfy { (address[$0] & subtree[address.count + $0]) == (subtree[$0] & subtree[address.count + $0]) }
    }

    private static func unique<T: Equatable>(_ values: [T]) -> [T] {
        values.enumerated().filter { index, value in !values[..<index].contains(value) }.map(\.element)
    }
}

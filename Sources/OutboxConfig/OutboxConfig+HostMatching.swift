import OutboxModel

extension OutboxConfig {
    /// A list of host patterns as `allowedHosts` and `tls.intercept.hosts` write them: `*`
    /// matches every host, `*.example.com` matches `api.example.com` and `a.b.example.com` but
    /// not `example.com` (list both to have both), any other entry matches only itself.
    /// Matching is case-insensitive and ignores IPv6 brackets and one trailing dot.
    public struct HostPatterns: Sendable, Equatable {
        /// As the config parser stores them: lowercased, IPv6 without brackets.
        public let patterns: [String]

        public init(_ patterns: [String]) {
            self.patterns = patterns
        }

        public func matches(_ host: String) -> Bool {
            let name = HostSyntax.matchingForm(host)
            guard !name.isEmpty else { return false }
            return patterns.contains { entry in
                if entry == "*" { return true }
                if entry.hasPrefix("*.") { return name.hasSuffix(entry.dropFirst()) && name.count > entry.count - 1 }
                return entry == name
            }
        }

        /// The entries that name one host exactly (neither `*` nor `*.suffix`), in the form
        /// ``matches(_:)`` compares (`HostSyntax.matchingForm`): the hosts a forward request may
        /// reach at a loopback, link-local or unspecified address when `listen` is not loopback.
        public var exactNames: Set<String> {
            Set(patterns.filter { !$0.hasPrefix("*") })
        }
    }
}

extension OutboxConfig.ForwardProxy {
    /// Whether `allowedHosts` lets a forward-proxy request reach `host` (else 403), by the
    /// rules of ``OutboxConfig/HostPatterns``. `enabled` is not consulted.
    public func allowsHost(_ host: String) -> Bool {
        OutboxConfig.HostPatterns(allowedHosts).matches(host)
    }
}

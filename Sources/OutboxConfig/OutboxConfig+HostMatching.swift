extension OutboxConfig.ForwardProxy {
    /// Whether `allowedHosts` lets a forward-proxy request reach `host` (else 403). Matching is
    /// case-insensitive and ignores IPv6 brackets and one trailing dot: `*` matches every host,
    /// `*.example.com` matches `api.example.com` and `a.b.example.com` but not `example.com`
    /// (list both to allow both), any other entry matches only itself. `enabled` is not consulted.
    public func allowsHost(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        guard !name.isEmpty else { return false }
        return allowedHosts.contains { entry in
            if entry == "*" { return true }
            if entry.hasPrefix("*.") { return name.hasSuffix(entry.dropFirst()) && name.count > entry.count - 1 }
            return entry == name
        }
    }
}

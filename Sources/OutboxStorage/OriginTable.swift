import OutboxModel

/// Hands out one shared `Origin` per (scheme, port, host) while recovery decodes a million
/// records, so their host and authority strings are stored once, not once per operation.
struct OriginTable {
    private struct Key: Hashable {
        var host: String
        var port: Int
        var https: Bool
    }

    private var origins: [Key: Origin] = [:]

    mutating func origin(scheme: Origin.Scheme, port: Int, host: UnsafeRawBufferPointer) -> Origin {
        let key = Key(host: String(decoding: host, as: UTF8.self), port: port, https: scheme == .https)
        if let known = origins[key] { return known }
        let origin = Origin(scheme: scheme, host: key.host, port: port)
        origins[key] = origin
        return origin
    }
}

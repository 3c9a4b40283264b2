import Glibc
import OutboxModel

/// Hands out one shared `Origin` per (scheme, port, host) while recovery decodes a million
/// records, so their host and authority strings are stored once, not once per operation.
/// Records of one origin come in runs: the last origin handed out is checked first, by its
/// bytes, so a run costs neither a `String` nor a hash per record.
struct OriginTable {
    private struct Key: Hashable {
        var host: String
        var port: Int
        var https: Bool
    }

    private var origins: [Key: Origin] = [:]
    private var last: (https: Bool, port: Int, host: [UInt8], origin: Origin)?

    /// The shared origin, and whether it differs from the one this table handed out last
    /// (true for the first).
    mutating func origin(scheme: Origin.Scheme, port: Int, host: UnsafeRawBufferPointer) -> (origin: Origin, changed: Bool) {
        let https = scheme == .https
        if let last, last.https == https, last.port == port, last.host.count == host.count,
           last.host.withUnsafeBytes({ known in
               guard let knownBase = known.baseAddress, let base = host.baseAddress else { return true }
               return memcmp(knownBase, base, host.count) == 0
           }) {
            return (last.origin, false)
        }
        let key = Key(host: String(decoding: host, as: UTF8.self), port: port, https: https)
        let origin: Origin
        if let known = origins[key] {
            origin = known
        } else {
            origin = Origin(scheme: scheme, host: key.host, port: port)
            origins[key] = origin
        }
        last = (https, port, Array(host), origin)
        return (origin, true)
    }
}

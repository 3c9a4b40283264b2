import Glibc

/// An IPv4 or IPv6 address without a port, for comparing a resolved target with Outbox's
/// listeners and for telling loopback, link-local and unspecified addresses apart. An
/// IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) is its IPv4 address: a connection to one
/// reaches the other.
package enum IPAddress: Hashable, Sendable, CustomStringConvertible {
    case v4(UInt32)
    /// The 16 bytes as two big-endian halves.
    case v6(UInt64, UInt64)

    /// 127.0.0.0/8 and ::1.
    package var isLoopback: Bool {
        switch self {
        case .v4(let value): value >> 24 == 127
        case .v6(let high, let low): high == 0 && low == 1
        }
    }

    /// 169.254.0.0/16 and fe80::/10.
    package var isLinkLocal: Bool {
        switch self {
        case .v4(let value): value >> 16 == 0xA9FE
        case .v6(let high, _): high >> 54 == 0x3FA
        }
    }

    /// 0.0.0.0 and `::`: as a listener, every local address; as a target, this host.
    package var isUnspecified: Bool {
        switch self {
        case .v4(let value): value == 0
        case .v6(let high, let low): high == 0 && low == 0
        }
    }

    /// Loopback, link-local or unspecified: what a wildcard `allowedHosts` entry does not reach
    /// while `listen` is not loopback (the machine's own services, cloud metadata endpoints).
    package var isInternal: Bool { isLoopback || isLinkLocal || isUnspecified }

    package var description: String {
        switch self {
        case .v4(let value):
            "\(value >> 24).\((value >> 16) & 0xFF).\((value >> 8) & 0xFF).\(value & 0xFF)"
        case .v6(let high, let low):
            Self.text(high: high, low: low)
        }
    }

    private static func text(high: UInt64, low: UInt64) -> String {
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { bytes in
            for index in 0..<8 {
                bytes[index] = UInt8(truncatingIfNeeded: high >> (56 - 8 * index))
                bytes[8 + index] = UInt8(truncatingIfNeeded: low >> (56 - 8 * index))
            }
        }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { return "unknown" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The addresses of this machine's interfaces (loopback included), from `getifaddrs`: what
    /// a listener on 0.0.0.0 or `::` accepts connections for. A system call that talks to the
    /// kernel over netlink; the pool asks for it once per resolution at most.
    package static func localInterfaceAddresses() -> [IPAddress] {
        var first: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&first) == 0, let first else { return [] }
        defer { freeifaddrs(first) }
        var addresses: [IPAddress] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            if let raw = entry.pointee.ifa_addr, let address = IPAddress(raw) { addresses.append(address) }
            cursor = entry.pointee.ifa_next
        }
        return addresses
    }

    /// Reads a `sockaddr_in` or `sockaddr_in6`; nil for other families.
    init?(_ raw: UnsafePointer<sockaddr>) {
        switch Int32(raw.pointee.sa_family) {
        case AF_INET:
            let value = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
            self = .v4(value)
        case AF_INET6:
            let bytes = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
            }
            let high = bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let low = bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            // ::ffff:a.b.c.d
            self = high == 0 && low >> 32 == 0xFFFF ? .v4(UInt32(truncatingIfNeeded: low)) : .v6(high, low)
        default:
            return nil
        }
    }
}

extension SocketAddress {
    /// The address without its port; nil for a family other than IPv4 and IPv6.
    package var ip: IPAddress? {
        var copy = storage
        return withUnsafePointer(to: &copy) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { IPAddress($0) }
        }
    }
}

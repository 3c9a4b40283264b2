import CSystem
import Glibc
import OutboxModel

/// A resolved IPv4 or IPv6 socket address, stored as raw `sockaddr_storage` bytes.
package struct SocketAddress: Sendable {
    var storage = sockaddr_storage()
    var length: socklen_t = 0

    var family: Int32 { Int32(storage.ss_family) }

    /// Numeric host text ("127.0.0.1", "::1"), for logs and `X-Forwarded-For`.
    package var hostText: String {
        var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var copy = storage
        let rc = withUnsafePointer(to: &copy) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST)
            }
        }
        guard rc == 0 else { return "unknown" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    package var port: Int {
        var copy = storage
        return withUnsafePointer(to: &copy) { pointer -> Int in
            if family == AF_INET {
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
        }
    }

    /// Resolves `host` (numeric or a name) to addresses for a stream socket.
    ///
    /// Blocking for names (getaddrinfo): callers on a loop thread use ``resolveNumeric(_:port:)``
    /// and move name lookups off the loop.
    static func resolve(host: String, port: Int) -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var result: UnsafeMutablePointer<addrinfo>?
        let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard getaddrinfo(bareHost, String(port), &hints, &result) == 0, let first = result else { return [] }
        defer { freeaddrinfo(first) }
        var addresses: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            if let addr = info.pointee.ai_addr {
                var address = SocketAddress()
                withUnsafeMutableBytes(of: &address.storage) { target in
                    target.copyMemory(from: UnsafeRawBufferPointer(start: addr, count: Int(info.pointee.ai_addrlen)))
                }
                address.length = info.pointee.ai_addrlen
                addresses.append(address)
            }
            cursor = info.pointee.ai_next
        }
        return addresses
    }

    /// Parses a numeric IPv4/IPv6 host without any lookup; nil for names.
    static func resolveNumeric(_ host: String, port: Int) -> SocketAddress? {
        let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var address = SocketAddress()
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, bareHost, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &address.storage) { target in
                withUnsafeBytes(of: v4) { target.copyMemory(from: $0) }
            }
            address.length = socklen_t(MemoryLayout<sockaddr_in>.size)
            return address
        }
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, bareHost, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &address.storage) { target in
                withUnsafeBytes(of: v6) { target.copyMemory(from: $0) }
            }
            address.length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            return address
        }
        return nil
    }

    /// True for 127.0.0.0/8 and ::1 (and IPv4-mapped loopback): who may reach `/admin` without a token.
    package var isLoopback: Bool {
        var copy = storage
        return withUnsafePointer(to: &copy) { pointer -> Bool in
            if family == AF_INET {
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    UInt32(bigEndian: $0.pointee.sin_addr.s_addr) >> 24 == 127
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { p -> Bool in
                let bytes = withUnsafeBytes(of: p.pointee.sin6_addr) { Array($0) }
                if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
                return bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff && bytes[12] == 127
            }
        }
    }
}

/// Socket system calls with the flags every Outbox socket needs (non-blocking, close-on-exec).
package enum Sockets {
    /// Creates a listening socket; returns the fd and the bound address (port 0 resolved).
    package static func listen(host: String, port: Int, backlog: Int32 = 1024) throws(SystemError) -> (Int32, SocketAddress) {
        let candidates = SocketAddress.resolveNumeric(host, port: port).map { [$0] } ?? SocketAddress.resolve(host: host, port: port)
        guard let address = candidates.first else { throw SystemError("resolve \(host)", code: EADDRNOTAVAIL) }
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var copy = address
        let bound = withUnsafePointer(to: &copy.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, copy.length) }
        }
        guard bound == 0 else {
            let error = SystemError("bind \(host):\(port)")
            close(fd)
            throw error
        }
        guard Glibc.listen(fd, backlog) == 0 else {
            let error = SystemError("listen")
            close(fd)
            throw error
        }
        var local = SocketAddress()
        local.length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &local.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &local.length) }
        }
        return (fd, local)
    }

    /// What one non-blocking `accept4` on a listening socket gave.
    package enum Accepted {
        /// A new connection (non-blocking, close-on-exec, `TCP_NODELAY`) and its peer.
        case connection(Int32, SocketAddress)
        /// Nothing is pending.
        case nothingPending
        /// The pending connection was lost before it could be taken (reset, aborted, a network
        /// error, refused by a firewall rule): the next one may be fine.
        case lost
        /// No descriptor or kernel memory for it (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`):
        /// the connection stays pending, and the listener stays readable, until some are free.
        case resourcesExhausted(SystemError)
    }

    /// Accepts one connection, non-blocking. While the process's ``DescriptorReserve`` is let
    /// go and cannot be taken back, nothing is accepted (`resourcesExhausted`); a shortage found
    /// here lets it go.
    package static func accept(_ listener: Int32) -> Accepted {
        let reserve = DescriptorReserve.process
        guard reserve.retake() else { return .resourcesExhausted(SystemError("accept4", code: EMFILE)) }
        var peer = SocketAddress()
        peer.length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = withUnsafeMutablePointer(to: &peer.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                csystem_accept4(listener, $0, &peer.length, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            }
        }
        guard fd >= 0 else {
            let error = SystemError("accept4")
            if error.code == EAGAIN || error.code == EWOULDBLOCK { return .nothingPending }
            // accept(2), Linux: errors of the pending connection (ECONNABORTED, EPROTO, network
            // errors, EPERM from a firewall) are that connection's; only a shortage leaves it queued.
            guard error.isResourceShortage else { return .lost }
            reserve.release()
            return .resourcesExhausted(error)
        }
        reserve.tookOne()
        setNoDelay(fd)
        return .connection(fd, peer)
    }

    /// Starts a non-blocking connect. Returns the fd, or the errno of an immediate failure.
    /// While the process's ``DescriptorReserve`` is let go and cannot be taken back, no socket is
    /// made (`socket` with `EMFILE`); a shortage found here lets it go.
    package static func connect(to address: SocketAddress) -> Result<Int32, SystemError> {
        let reserve = DescriptorReserve.process
        guard reserve.retake() else { return .failure(SystemError("socket", code: EMFILE)) }
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            let error = SystemError("socket")
            if error.isResourceShortage { reserve.release() }
            return .failure(error)
        }
        reserve.tookOne()
        setNoDelay(fd)
        var copy = address
        let rc = withUnsafePointer(to: &copy.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, copy.length) }
        }
        if rc == 0 || errno == EINPROGRESS { return .success(fd) }
        let error = SystemError("connect")
        close(fd)
        if error.isResourceShortage { reserve.release() }
        return .failure(error)
    }

    /// Connects to `address` and waits, blocking (never on a loop thread), until the connection
    /// is made or `end` (monotonic nanoseconds) passes: the connected non-blocking fd, or why
    /// not (`connect` with `ETIMEDOUT` when the deadline passed).
    package static func connectAndWait(to address: SocketAddress, until end: UInt64) -> Result<Int32, SystemError> {
        let fd: Int32
        switch connect(to: address) {
        case .success(let connecting): fd = connecting
        case .failure(let error): return .failure(error)
        }
        guard wait(fd, for: POLLOUT, until: end) else {
            close(fd)
            return .failure(SystemError("connect", code: ETIMEDOUT))
        }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0, error == 0 else {
            let failure = SystemError("connect", code: error == 0 ? errno : error)
            close(fd)
            return .failure(failure)
        }
        return .success(fd)
    }

    /// A name's addresses in the order to use them, and the connection that picked the first.
    package struct Reached: Sendable {
        package var addresses: [SocketAddress]
        /// Connected (non-blocking) to `addresses[0]` when one had to be found by connecting;
        /// the caller's to use for its first connection, or to close.
        package var connected: Int32?
    }

    /// `addresses` with the first one that accepts a TCP connection (within `timeout` seconds
    /// each, tried in order) moved to the front, and that connection; unchanged and nothing
    /// connected when there is one address only, or when none accepts. A name often has an
    /// address the origin does not listen on: `localhost` is `::1` and `127.0.0.1`, and a
    /// server bound to IPv4 only refuses the IPv6 one that the resolver lists first. Blocking:
    /// for the name lookup's worker thread.
    package static func reachableFirst(_ addresses: [SocketAddress], timeout: Double) -> Reached {
        guard addresses.count > 1 else { return Reached(addresses: addresses) }
        for (index, address) in addresses.enumerated() {
            guard case .success(let fd) = connectAndWait(to: address, until: deadline(after: timeout)) else { continue }
            var ordered = addresses
            ordered.remove(at: index)
            ordered.insert(address, at: 0)
            return Reached(addresses: ordered, connected: fd)
        }
        return Reached(addresses: addresses)
    }

    /// Whether a connected socket nobody has used yet still stands: not ended by its peer (a
    /// server that speaks first may have sent bytes, which stay queued for the reader).
    package static func isStillOpen(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        let peeked = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return peeked > 0 || (peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    }

    /// The monotonic time (ns) `seconds` from now: at least a millisecond, so a wait always
    /// polls once.
    package static func deadline(after seconds: Double) -> UInt64 {
        MonotonicClock.nanos() + Clock.nanos(max(0.001, seconds))
    }

    /// Polls `fd` for `events` until `end` (monotonic nanoseconds); true when ready. An error
    /// or hang-up counts as ready: the caller's `SO_ERROR` or `recv` tells which.
    package static func wait(_ fd: Int32, for events: Int32, until end: UInt64) -> Bool {
        while true {
            let now = MonotonicClock.nanos()
            // One more look at the deadline itself, so a zero remainder still polls once.
            let remaining = end > now ? Int32(min(Int64(Int32.max), Int64((end - now) / 1_000_000) + 1)) : 0
            var poller = pollfd(fd: fd, events: Int16(events), revents: 0)
            let ready = poll(&poller, 1, remaining)
            if ready > 0 { return true }
            if ready < 0 && errno == EINTR { continue }
            return false
        }
    }

    // Responses are written whole by us; Nagle would only add latency to the last segment.
    static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }
}

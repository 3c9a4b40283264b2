import Glibc

/// Thin throwing wrappers over the BSD socket calls the harness needs, always on 127.0.0.1.
/// Every descriptor is close-on-exec: the proxy and curl are spawned from this process while
/// other tests hold sockets, and an inherited copy would keep a socket open after its owner
/// closed it (a missing EOF, a port that cannot be rebound).
enum Socket {
    /// A listening socket on 127.0.0.1:`port` (0 picks a free port) with SO_REUSEADDR so a
    /// stopped upstream can come back on the same port while old connections sit in TIME_WAIT.
    /// `reusePort` (SO_REUSEPORT) lets a placeholder from `bindOnly` share the port with it.
    static func listen(port: UInt16 = 0, backlog: Int32 = 128, reusePort: Bool = false) throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketError.system("socket", errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if reusePort { setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) }
        var address = loopbackAddress(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw SocketError.system("bind 127.0.0.1:\(port)", code)
        }
        guard Glibc.listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            throw SocketError.system("listen", code)
        }
        do {
            return (fd, try localPort(of: fd))
        } catch {
            close(fd)
            throw error
        }
    }

    /// A socket bound to 127.0.0.1:`port` but not listening (SO_REUSEADDR, so TIME_WAIT
    /// connections of the old listener don't stop it): it holds the port; -1 if bind failed.
    /// With `reusePort` it can be bound while a `listen(reusePort: true)` socket still is.
    static func bindOnly(port: UInt16, reusePort: Bool = false) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if reusePort { setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) }
        var address = loopbackAddress(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            close(fd)
            return -1
        }
        return fd
    }

    /// A non-blocking socket connected to 127.0.0.1:`port`; throws `.refused` when nothing listens.
    /// `receiveBuffer` (bytes) pins `SO_RCVBUF` before connecting, which caps the window the
    /// peer may fill: a test of a reader that falls behind needs the peer to notice soon.
    static func connect(port: UInt16, deadline: Deadline, receiveBuffer: Int32? = nil) throws -> Int32 {
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        let fd = socket(AF_INET, type, 0)
        guard fd >= 0 else { throw SocketError.system("socket", errno) }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = loopbackAddress(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result == 0 { return fd }
        var code = errno
        if code == EINPROGRESS {
            do {
                guard try poll(fd, events: Int16(POLLOUT), deadline: deadline) else {
                    close(fd)
                    throw SocketError.timedOut("connecting to 127.0.0.1:\(port)")
                }
            } catch {
                close(fd)
                throw error
            }
            var pending: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &pending, &length)
            if pending == 0 { return fd }
            code = pending
        }
        close(fd)
        if code == ECONNREFUSED { throw SocketError.refused }
        throw SocketError.system("connect 127.0.0.1:\(port)", code)
    }

    /// Blocks until a connection arrives; nil once the listener has been shut down or closed.
    static func accept(_ listener: Int32) -> Int32? {
        while true {
            // accept4 is hidden behind _GNU_SOURCE; Foundation's Process also closes stray
            // descriptors in the child, so the short window before FD_CLOEXEC is harmless.
            let fd = Glibc.accept(listener, nil, nil)
            if fd >= 0 {
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                return fd
            }
            if errno == EINTR || errno == ECONNABORTED { continue }
            return nil
        }
    }

    /// The local port a socket is bound to.
    static func localPort(of fd: Int32) throws -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard result == 0 else { throw SocketError.system("getsockname", errno) }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Writes every byte, waiting for buffer space up to `deadline` (nil: wait indefinitely,
    /// for harness threads that a shutdown(2) unblocks).
    static func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, deadline: Deadline?) throws {
        guard let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            let sent = send(fd, base + offset, bytes.count - offset, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            if sent > 0 {
                offset += sent
                continue
            }
            let code = errno
            if sent < 0 && (code == EAGAIN || code == EWOULDBLOCK) {
                guard try poll(fd, events: Int16(POLLOUT), deadline: deadline) else {
                    throw SocketError.timedOut("writing (\(offset) of \(bytes.count) bytes sent)")
                }
                continue
            }
            if sent < 0 && code == EINTR { continue }
            if code == ECONNRESET || code == EPIPE { throw SocketError.reset }
            throw SocketError.system("send", code)
        }
    }

    /// Reads what is available (at least one byte) into `buffer`; 0 means the peer closed.
    static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, deadline: Deadline?) throws -> Int {
        while true {
            let received = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
            if received >= 0 { return received }
            let code = errno
            if code == EAGAIN || code == EWOULDBLOCK {
                guard try poll(fd, events: Int16(POLLIN), deadline: deadline) else {
                    throw SocketError.timedOut("reading")
                }
                continue
            }
            if code == EINTR { continue }
            if code == ECONNRESET { throw SocketError.reset }
            throw SocketError.system("recv", code)
        }
    }

    /// Waits for `events` on `fd`; false when the deadline passed first. Error and hang-up
    /// conditions count as ready so that the following call reports them.
    static func poll(_ fd: Int32, events: Int16, deadline: Deadline?) throws -> Bool {
        try HarnessExecutor.requireOffCooperativePool("waiting on a socket")
        while true {
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            let ready = Glibc.poll(&descriptor, 1, deadline?.pollMilliseconds ?? -1)
            if ready > 0 { return true }
            if ready == 0 {
                if deadline?.hasPassed ?? false { return false }
                continue
            }
            if errno == EINTR { continue }
            throw SocketError.system("poll", errno)
        }
    }

    private static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        return address
    }
}

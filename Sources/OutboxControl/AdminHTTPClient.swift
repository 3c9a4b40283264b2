import Glibc
import OutboxHTTP
import OutboxModel

/// An admin API answer: its status and body.
package struct AdminReply: Sendable {
    package var status: Int
    package var body: [UInt8]
}

/// Why a request got no answer, in the words of the one line an operator reads.
package struct AdminUnreachable: Error, Sendable, CustomStringConvertible {
    package var reason: String
    package var description: String { reason }
}

/// One request, one connection, blocking: the admin commands are short-lived processes that
/// ask one thing and exit, so an event loop would only add code. Every wait is bounded
/// (`connectTimeout`, then `responseTimeout` for the whole answer), so a wedged listener ends
/// the command with exit 1 instead of hanging a CI job.
package struct AdminHTTPClient: Sendable {
    package var target: AdminTarget
    package var userAgent: String
    package var connectTimeoutSeconds = 5.0

    package init(target: AdminTarget, userAgent: String) {
        self.target = target
        self.userAgent = userAgent
    }

    /// Sends `method path` (`path` relative to the admin prefix, with its query) and reads the
    /// whole answer. Bodies of admin answers are small: they are collected, up to 64 MiB.
    package func send(_ method: String, _ path: String, json body: JSON? = nil,
                      responseTimeoutSeconds: Double = 30) throws(AdminUnreachable) -> AdminReply {
        var headers = HTTPHeaders()
        headers.add("Host", "\(HostSyntax.bracketed(target.host)):\(target.port)")
        headers.add("User-Agent", userAgent)
        headers.add("Accept", "application/json")
        headers.add("Connection", "close")
        if let token = target.token { headers.add("Authorization", "Bearer \(token)") }
        let payload = body.map { Array($0.rendered().utf8) } ?? []
        if body != nil {
            headers.add("Content-Type", "application/json")
            headers.add("Content-Length", String(payload.count))
        }
        var request: [UInt8] = []
        HTTPSerializer.writeRequestHead(HTTPRequestHead(method: method, target: target.pathPrefix + path, headers: headers),
                                        into: &request)
        request += payload

        let fd = try connect()
        defer { close(fd) }
        let deadline = Self.now() + connectTimeoutSeconds + responseTimeoutSeconds
        try write(request, to: fd, deadline: deadline)
        return try readReply(from: fd, method: method, deadline: deadline)
    }

    private func connect() throws(AdminUnreachable) -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(target.host, String(target.port), &hints, &list)
        guard status == 0, let first = list else {
            throw AdminUnreachable(reason: "cannot resolve \(target.host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var lastReason = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        // Every address in turn: `localhost` may name ::1 first while Outbox listens on 127.0.0.1.
        while let address = entry {
            entry = address.pointee.ai_next
            let fd = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { lastReason = String(cString: strerror(errno)); continue }
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            if Glibc.connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 || errno == EINPROGRESS {
                var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                let ready = poll(&poller, 1, Int32(connectTimeoutSeconds * 1000))
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                if ready == 1, getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0, error == 0 {
                    return fd
                }
                lastReason = ready == 0 ? "connect timed out after \(JSON.numberText(connectTimeoutSeconds)) s"
                    : String(cString: strerror(error != 0 ? error : errno)).lowercased()
            } else {
                lastReason = String(cString: strerror(errno)).lowercased()
            }
            close(fd)
        }
        throw AdminUnreachable(reason: lastReason)
    }

    private func write(_ bytes: [UInt8], to fd: Int32, deadline: Double) throws(AdminUnreachable) {
        var sent = 0
        while sent < bytes.count {
            try wait(fd, for: Int16(POLLOUT), until: deadline)
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                throw AdminUnreachable(reason: "send failed: \(String(cString: strerror(errno)).lowercased())")
            }
            sent += count
        }
    }

    private func readReply(from fd: Int32, method: String, deadline: Double) throws(AdminUnreachable) -> AdminReply {
        var parser = HTTPResponseParser(limits: HTTPParserLimits(maxBodyBytes: 64 << 20))
        parser.expectResponse(toMethod: method)
        var status: Int?
        var body: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        func consume(_ event: HTTPResponseParser.Event?, in bytes: [UInt8]) -> Bool {
            switch event {
            case .head(let head, _): if head.status >= 200 { status = head.status }
            case .body(let range): body += bytes[range]
            case .end: if status != nil { return true }
            case nil: break
            }
            return false
        }
        while true {
            try wait(fd, for: Int16(POLLIN), until: deadline)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                throw AdminUnreachable(reason: "receive failed: \(String(cString: strerror(errno)).lowercased())")
            }
            do {
                if count == 0 {
                    if consume(try parser.finish(), in: []), let status { return AdminReply(status: status, body: body) }
                    throw AdminUnreachable(reason: "connection closed before a complete answer")
                }
                let bytes = Array(buffer[..<count])
                var index = 0
                while let event = try parser.next(in: bytes, index: &index) {
                    if consume(event, in: bytes), let status { return AdminReply(status: status, body: body) }
                }
            } catch let error as HTTPParseError {
                throw AdminUnreachable(reason: "not an HTTP answer (\(error))")
            } catch let error as AdminUnreachable {
                throw error
            } catch {
                throw AdminUnreachable(reason: "\(error)")
            }
        }
    }

    private func wait(_ fd: Int32, for events: Int16, until deadline: Double) throws(AdminUnreachable) {
        while true {
            let remaining = deadline - Self.now()
            // Looks once more at the deadline: an answer that arrived just then still counts.
            var poller = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&poller, 1, Int32(max(0, remaining) * 1000))
            if ready > 0 { return }
            if ready < 0 && errno == EINTR { continue }
            if remaining <= 0 || ready == 0 { throw AdminUnreachable(reason: "no answer in time") }
        }
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

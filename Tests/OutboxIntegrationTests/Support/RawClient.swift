import Glibc
import OutboxModel

/// A test's own HTTP client: one TCP connection to 127.0.0.1, bytes sent exactly as written,
/// responses parsed by the harness (status, headers, body by Content-Length, chunked or close).
/// Every wait has a deadline, so a silent proxy fails the test instead of hanging it.
final class RawClient {
    /// What to do with response bodies.
    enum BodyHandling {
        /// Keep the bytes (and hash them).
        case collect
        /// Only count and hash them: for bodies of many megabytes.
        case digestOnly
        /// Count and hash them, and hand each piece to the closure as it arrives: for bodies of
        /// many megabytes that the test reads into something smaller.
        case inspect((UnsafeRawBufferPointer) -> Void)
        /// Count and hash, and stop reading for `pause` after every `everyBytes` bytes, so the
        /// proxy's buffers fill up and it has to stop reading from the upstream.
        case digestWithPauses(everyBytes: Int, pause: Duration)
    }

    let port: UInt16
    private let fd: Int32
    private let reader: SocketReader
    private var isClosed = false

    /// Connects to 127.0.0.1:`port`; throws `SocketError.refused` when nothing listens.
    init(port: UInt16, timeout: Duration = .seconds(5), readSize: Int = 64 * 1024, receiveBuffer: Int32? = nil) throws {
        try HarnessExecutor.requireOffCooperativePool("a RawClient")
        self.port = port
        fd = try Socket.connect(port: port, deadline: Deadline(after: timeout), receiveBuffer: receiveBuffer)
        reader = SocketReader(fd: fd, maxReadSize: readSize)
    }

    deinit {
        close()
    }

    /// Whether a connection to `port` is refused right now (nothing listens there).
    static func isRefused(port: UInt16) -> Bool {
        do {
            _ = try RawClient(port: port, timeout: .seconds(2))
            return false
        } catch {
            return error as? SocketError == .refused
        }
    }

    /// Sends the UTF-8 bytes of `text`.
    func send(_ text: String, timeout: Duration = .seconds(10)) throws {
        try send(Array(text.utf8), timeout: timeout)
    }

    /// Sends `bytes` in one write.
    func send(_ bytes: [UInt8], timeout: Duration = .seconds(10)) throws {
        try bytes.withUnsafeBytes { try Socket.sendAll(fd, $0, deadline: Deadline(after: timeout)) }
    }

    /// Reads the next response, interim (1xx) responses included: a test that expects
    /// `100 Continue` reads it, then reads again for the final one. `method` decides whether a
    /// body can follow (HEAD and a successful CONNECT have none).
    func readResponse(to method: String = "GET", timeout: Duration = .seconds(10),
                      body handling: BodyHandling = .collect) throws -> HTTPResponse {
        let deadline = Deadline(after: timeout)
        guard let rawHead = try reader.readHead(limit: 1 << 20, deadline: deadline) else {
            throw SocketError.closed("before a response head arrived")
        }
        let head = try HTTPHead(parsing: rawHead)
        let parts = head.startLineParts
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw HarnessError("malformed status line \(head.startLine.debugDescription)")
        }
        let headers = head.headers
        var body: [UInt8] = []
        var hasher = SHA256()
        var byteCount = 0
        var nextPauseAt = Int.max
        if case .digestWithPauses(let every, _) = handling { nextPauseAt = every }
        let sink: (UnsafeRawBufferPointer) -> Void = { piece in
            byteCount += piece.count
            hasher.update(piece)
            switch handling {
            case .collect:
                body.append(contentsOf: piece)
            case .digestOnly:
                break
            case .inspect(let look):
                look(piece)
            case .digestWithPauses(let every, let pause):
                // Load shaping, not synchronisation: nothing is awaited here.
                if byteCount >= nextPauseAt {
                    nextPauseAt += every
                    let (seconds, attoseconds) = pause.components
                    usleep(UInt32(seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
                }
            }
        }
        var framing = HTTPResponse.BodyFraming.none
        var trailers = HTTPHeaders()
        let bodiless = (100..<200).contains(status) || status == 204 || status == 304 || method == "HEAD"
            || (method == "CONNECT" && (200..<300).contains(status))
        if !bodiless {
            if headers.contains("Transfer-Encoding") {
                guard headers.tokens("Transfer-Encoding").last == "chunked" else {
                    throw HarnessError("response Transfer-Encoding without chunked: \(headers.values("Transfer-Encoding"))")
                }
                trailers = try reader.readChunked(deadline: deadline, sink: sink).trailers
                framing = .chunked
            } else if let lengthText = headers["Content-Length"] {
                guard headers.values("Content-Length").count == 1, let length = Int(lengthText), length >= 0 else {
                    throw HarnessError("bad response Content-Length \(headers.values("Content-Length"))")
                }
                try reader.readExactly(length, deadline: deadline, sink: sink)
                framing = .contentLength(length)
            } else {
                try reader.readToEOF(deadline: deadline, sink: sink)
                framing = .closeDelimited
            }
        }
        return HTTPResponse(
            version: parts[0], status: status, reason: parts.count > 2 ? parts[2] : "",
            headers: headers, rawHead: rawHead, framing: framing, body: body,
            bodyByteCount: byteCount, bodySHA256: hasher.finalizeHex(), trailers: trailers)
    }

    /// Reads a response head (status line and fields, through the blank line) and nothing more:
    /// for streams whose body never ends.
    func readHeadOnly(timeout: Duration = .seconds(10)) throws -> [UInt8]? {
        try reader.readHead(limit: 64 * 1024, deadline: Deadline(after: timeout))
    }

    /// Reads one line (without its line end).
    func readLine(timeout: Duration = .seconds(10)) throws -> String {
        String(decoding: try reader.readLine(deadline: Deadline(after: timeout)), as: UTF8.self)
    }

    /// Reads exactly `count` raw bytes (tunnel traffic).
    func readBytes(_ count: Int, timeout: Duration = .seconds(10)) throws -> [UInt8] {
        try reader.readBytes(count, deadline: Deadline(after: timeout))
    }

    /// Reads raw bytes until the peer closes.
    func readUntilEOF(timeout: Duration = .seconds(10)) throws -> [UInt8] {
        var bytes: [UInt8] = []
        try reader.readToEOF(deadline: Deadline(after: timeout)) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// True when the peer closes (or resets) the connection within `timeout` without sending
    /// anything more.
    func waitForClose(timeout: Duration = .seconds(30)) -> Bool {
        reader.waitForClose(deadline: Deadline(after: timeout))
    }

    /// Half-closes: the peer reads EOF, the client can still read.
    func shutdownWrite() {
        shutdown(fd, Int32(SHUT_WR))
    }

    /// Closes the connection (also done on deinit).
    func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }
}

import Glibc

/// One connection of the test upstream: reads requests in a loop, records them, and carries
/// out the handler's script. Lives on the connection's thread; never closes its descriptor.
struct UpstreamConnection {
    let connection: ConnectionAcceptor.Connection
    let handler: TestUpstream.Handler
    let journal: TestUpstream.Journal

    /// Serves requests until the peer closes, the script closes, or the upstream stops.
    func serve() {
        let journal = self.journal
        let reader = SocketReader(fd: connection.fd) { count in
            journal.receivedBytes.add(count, ordering: .relaxed)
        }
        do {
            while let request = try readRequest(reader) {
                let keepAlive = try perform(handler(request), for: request)
                if !keepAlive { return }
            }
        } catch {
            if connection.isRunning() {
                journal.state.update { $0.problems.append("connection \(connection.id): \(error)") }
            }
        }
    }

    private func readRequest(_ reader: SocketReader) throws -> RecordedRequest? {
        let consumedBefore = reader.totalBytesReceived - reader.bufferedCount
        guard let rawHead = try reader.readHead(limit: 1 << 20, deadline: nil) else { return nil }
        let head = try HTTPHead(parsing: rawHead)
        let parts = head.startLine.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3 else {
            throw HarnessError("malformed request line \(head.startLine.debugDescription)")
        }
        let headers = head.headers
        var body: [UInt8] = []
        var framing = RecordedRequest.BodyFraming.none
        var chunkedInfo: ChunkedBodyInfo?
        let isChunked = headers.tokens("Transfer-Encoding").last == "chunked"
        let contentLength = headers["Content-Length"].flatMap { Int($0) }
        if headers["Content-Length"] != nil && contentLength == nil {
            throw HarnessError("unparsable Content-Length \(headers.values("Content-Length"))")
        }
        let hasBody = isChunked || (contentLength ?? 0) > 0
        if hasBody && headers["Expect"]?.lowercased() == "100-continue" {
            try send(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
        }
        if isChunked {
            chunkedInfo = try reader.readChunked(deadline: nil) { body.append(contentsOf: $0) }
            framing = .chunked
        } else if let contentLength {
            body = try reader.readBytes(contentLength, deadline: nil)
            framing = .contentLength(contentLength)
        }
        let consumedAfter = reader.totalBytesReceived - reader.bufferedCount
        return journal.state.update { log in
            let request = RecordedRequest(
                index: log.requests.count, connectionID: connection.id,
                method: parts[0], target: parts[1], version: parts[2],
                headers: headers, body: body, bodyFraming: framing, chunkedInfo: chunkedInfo,
                rawHead: rawHead, rawByteCount: consumedAfter - consumedBefore)
            log.requests.append(request)
            return request
        }
    }

    /// Carries out `action`; returns whether the connection stays open for another request.
    private func perform(_ action: UpstreamAction, for request: RecordedRequest) throws -> Bool {
        switch action {
        case .respond(let response):
            try write(response, for: request, headOnly: false)
            return keepsAlive(request: request, response: response)
        case .hold(let gate, let then):
            // The test opens the gate, or stops the upstream (at the latest when it ends, also by
            // failing): the bound only keeps a broken harness from holding a thread for ever. It
            // is long, because it runs in real time while the test's own steps may wait for
            // Swift's cooperative pool on a busy machine.
            let deadline = Deadline(after: .seconds(600))
            while !gate.waitBlocking(timeout: .milliseconds(50)) {
                if !connection.isRunning() || deadline.hasPassed { return false }
            }
            return try perform(then, for: request)
        case .closeWithoutAnswer:
            return false
        case .sendRawThenClose(let bytes):
            try send(bytes)
            return false
        case .sendHeadThenClose(let response):
            try write(response, for: request, headOnly: true)
            return false
        case .trickle(let response, let interval):
            try write(response, for: request, headOnly: true)
            guard case .bytes(let bytes) = response.body else { throw HarnessError("a trickle sends bytes") }
            for byte in bytes {
                if peerCloses(within: interval) || !connection.isRunning() {
                    noteClosedByPeer(request)
                    return false
                }
                do { try send([byte]) } catch {
                    noteClosedByPeer(request)
                    return false
                }
            }
            return keepsAlive(request: request, response: response)
        case .endless(var response):
            response.framing = .chunked()
            try write(response, for: request, headOnly: true)
            let chunk = Array("4000\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "e"), count: 0x4000) + [13, 10]
            let deadline = Deadline(after: .seconds(60))
            while connection.isRunning(), !deadline.hasPassed {
                do {
                    try chunk.withUnsafeBytes { try Socket.sendAll(connection.fd, $0, deadline: Deadline(after: .milliseconds(200))) }
                } catch SocketError.timedOut {
                    // The peer reads slower than we write: look whether it is still there.
                } catch {
                    break
                }
                // A short pause between chunks keeps the CPU for the others, and looks for a close.
                if peerCloses(within: .milliseconds(2)) { break }
            }
            if connection.isRunning() && !deadline.hasPassed { noteClosedByPeer(request) }
            return false
        case .holdUntilPeerCloses:
            let deadline = Deadline(after: .seconds(60))
            while connection.isRunning(), !deadline.hasPassed {
                if peerCloses(within: .milliseconds(50)) {
                    noteClosedByPeer(request)
                    break
                }
            }
            return false
        }
    }

    /// Whether the peer closes (or resets) the connection within `duration`; bytes from it
    /// count as "not closed" and stay unread.
    private func peerCloses(within duration: Duration) -> Bool {
        var descriptor = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
        let ready = Glibc.poll(&descriptor, 1, Deadline(after: duration).pollMilliseconds)
        guard ready > 0 else { return false }
        var byte: UInt8 = 0
        let peeked = recv(connection.fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        return peeked == 0 || (peeked < 0 && errno != EAGAIN && errno != EINTR)
    }

    private func noteClosedByPeer(_ request: RecordedRequest) {
        journal.state.update { $0.closedByPeer.append(request.index) }
    }

    private func keepsAlive(request: RecordedRequest, response: UpstreamResponse) -> Bool {
        if response.framing == .closeDelimited && !response.statusForbidsBody && request.method != "HEAD" {
            return false
        }
        if HTTPHeaders(response.headers).tokens("Connection").contains("close") { return false }
        let requestTokens = request.headers.tokens("Connection")
        if requestTokens.contains("close") { return false }
        return request.version == "HTTP/1.1" || requestTokens.contains("keep-alive")
    }

    private func write(_ response: UpstreamResponse, for request: RecordedRequest, headOnly: Bool) throws {
        let headers = HTTPHeaders(response.headers)
        let sendsBody = !response.statusForbidsBody && request.method != "HEAD" && !headOnly
        var head = "HTTP/1.1 \(response.status) \(response.reason)\r\n"
        for field in response.headers { head += "\(field.name): \(field.value)\r\n" }
        if !response.statusForbidsBody && !headers.contains("Content-Length") && !headers.contains("Transfer-Encoding") {
            switch response.framing {
            case .contentLength: head += "Content-Length: \(response.body.count)\r\n"
            case .chunked: head += "Transfer-Encoding: chunked\r\n"
            case .closeDelimited: break
            }
        }
        head += "\r\n"
        guard sendsBody else {
            try send(Array(head.utf8))
            return
        }
        // Head and body pieces go out through one buffer filled with memcpy: tests run
        // unoptimised, where appending 64 MiB byte by byte would take longer than the test.
        var output = OutputBuffer(fd: connection.fd)
        output.append(Array(head.utf8))
        if case .chunked(let chunkSize, let trailers) = response.framing {
            try streamBody(response.body, pieceSize: chunkSize) { piece in
                output.append(Array((String(piece.count, radix: 16) + "\r\n").utf8))
                output.append(piece)
                output.append([13, 10])
                try output.flush()
            }
            var tail = "0\r\n"
            for field in trailers { tail += "\(field.name): \(field.value)\r\n" }
            tail += "\r\n"
            output.append(Array(tail.utf8))
        } else {
            try streamBody(response.body, pieceSize: 64 * 1024) { piece in
                output.append(piece)
                try output.flush()
            }
        }
        try output.flush()
    }

    /// Hands the body to `emit` in pieces of at most `pieceSize` bytes, generating as it goes.
    private func streamBody(_ body: UpstreamResponse.Body, pieceSize: Int,
                            emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch body {
        case .bytes(let bytes):
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + pieceSize)
                try bytes.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[offset..<end])) }
                offset = end
            }
        case .generated(let generated):
            var stream = generated.makeStream()
            // The stream fills whole 8-byte words, so the piece size is rounded to a multiple of 8.
            var buffer = [UInt8](repeating: 0, count: max(8, pieceSize / 8 * 8))
            while true {
                let produced = stream.read(into: &buffer)
                if produced == 0 { return }
                try buffer.withUnsafeBytes { try emit(UnsafeRawBufferPointer(rebasing: $0[0..<produced])) }
            }
        }
    }

    private func send(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try Socket.sendAll(connection.fd, $0, deadline: nil) }
    }
}

import Glibc

/// Buffered reads from one socket for the harness's HTTP parsing, with a deadline on every
/// wait (nil for upstream threads, which a shutdown(2) unblocks). Owned by one thread.
final class SocketReader {
    let fd: Int32
    /// The largest single recv(2); the streaming test uses 64 KiB to read "slowly-ish".
    let maxReadSize: Int
    private var storage: [UInt8]
    private var start = 0
    private var end = 0
    /// Bytes taken from the socket so far, consumed or not.
    private(set) var totalBytesReceived = 0

    private let onReceive: (Int) -> Void

    /// A reader over `fd`; it never closes the descriptor. `onReceive` hears of every byte
    /// count as it arrives (the upstream counts what reached it, parsed or not).
    init(fd: Int32, maxReadSize: Int = 64 * 1024, onReceive: @escaping (Int) -> Void = { _ in }) {
        self.fd = fd
        self.maxReadSize = maxReadSize
        self.onReceive = onReceive
        storage = [UInt8](repeating: 0, count: maxReadSize)
    }

    /// Bytes received but not consumed yet.
    var bufferedCount: Int { end - start }

    /// Reads up to and including the blank line ending a head. Nil when the peer closed
    /// before sending a byte; throws when it closed mid-head or the head exceeds `limit`.
    func readHead(limit: Int, deadline: Deadline?) throws -> [UInt8]? {
        // Scan positions are kept relative to `start`: fill() may move the buffered bytes.
        var scanned = 0
        while true {
            if let terminator = findHeadEnd(from: start + scanned) {
                let head = Array(storage[start..<terminator])
                start = terminator
                return head
            }
            scanned = max(0, end - start - 3)
            guard end - start <= limit else { throw HarnessError("head longer than \(limit) bytes") }
            guard try fill(deadline: deadline) else {
                if end == start { return nil }
                throw SocketError.closed("in the middle of a head after \(end - start) bytes: "
                    + String(decoding: storage[start..<end].prefix(200), as: UTF8.self).debugDescription)
            }
        }
    }

    /// Reads one line and returns it without its CRLF.
    func readLine(limit: Int = 64 * 1024, deadline: Deadline?) throws -> [UInt8] {
        var scanned = 0
        while true {
            if let newline = storage[(start + scanned)..<end].firstIndex(of: UInt8(ascii: "\n")) {
                var line = Array(storage[start..<newline])
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                start = newline + 1
                return line
            }
            scanned = end - start
            guard scanned <= limit else { throw HarnessError("line longer than \(limit) bytes") }
            guard try fill(deadline: deadline) else { throw SocketError.closed("in the middle of a line") }
        }
    }

    /// Passes exactly `count` bytes to `sink`, in pieces of at most `maxReadSize`.
    func readExactly(_ count: Int, deadline: Deadline?, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        var remaining = count
        while remaining > 0 {
            if start == end {
                guard try fill(deadline: deadline, atMost: remaining) else {
                    throw SocketError.closed("with \(remaining) of \(count) body bytes missing")
                }
            }
            let take = min(remaining, end - start)
            try storage.withUnsafeBytes { try sink(UnsafeRawBufferPointer(rebasing: $0[start..<(start + take)])) }
            start += take
            remaining -= take
        }
    }

    /// Reads exactly `count` bytes into an array.
    func readBytes(_ count: Int, deadline: Deadline?) throws -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        try readExactly(count, deadline: deadline) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// Passes everything until the peer closes to `sink`.
    func readToEOF(deadline: Deadline?, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        while true {
            if start < end {
                try storage.withUnsafeBytes { try sink(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
                start = end
            }
            guard try fill(deadline: deadline) else { return }
        }
    }

    /// Decodes a chunked body (RFC 9112 §7.1), passing the data to `sink`.
    func readChunked(deadline: Deadline?, sink: (UnsafeRawBufferPointer) throws -> Void) throws -> ChunkedBodyInfo {
        var info = ChunkedBodyInfo()
        while true {
            let line = String(decoding: try readLine(deadline: deadline), as: UTF8.self)
            let parts = line.split(separator: ";", maxSplits: 1)
            let sizeText = (parts.first.map(String.init) ?? "").trimmingCharacters(in: " \t")
            guard let size = Int(sizeText, radix: 16), size >= 0 else {
                throw HarnessError("bad chunk size line \(line.debugDescription)")
            }
            if parts.count > 1 { info.extensions.append(String(parts[1])) }
            info.chunkSizes.append(size)
            if size == 0 { break }
            try readExactly(size, deadline: deadline, sink: sink)
            let crlf = try readLine(limit: 2, deadline: deadline)
            guard crlf.isEmpty else { throw HarnessError("chunk data not followed by CRLF") }
        }
        while true {
            let line = try readLine(deadline: deadline)
            if line.isEmpty { break }
            let text = String(decoding: line, as: UTF8.self)
            guard let colon = text.firstIndex(of: ":") else { throw HarnessError("bad trailer \(text.debugDescription)") }
            info.trailers.fields.append(HeaderField(
                String(text[..<colon]), text[text.index(after: colon)...].trimmingCharacters(in: " \t")))
        }
        return info
    }

    /// Returns true if the peer closes (or resets) the connection before `deadline` without
    /// sending anything more; false if bytes arrive or the deadline passes.
    func waitForClose(deadline: Deadline) -> Bool {
        guard start == end else { return false }
        do {
            return try !fill(deadline: deadline)
        } catch SocketError.reset {
            return true
        } catch {
            return false
        }
    }

    private func findHeadEnd(from scanFrom: Int) -> Int? {
        guard end - scanFrom >= 4 else { return nil }
        var index = scanFrom
        while index + 3 < end {
            if storage[index] == 13, storage[index + 1] == 10, storage[index + 2] == 13, storage[index + 3] == 10 {
                return index + 4
            }
            index += 1
        }
        return nil
    }

    /// Appends received bytes to the buffer; false on EOF.
    private func fill(deadline: Deadline?, atMost: Int = .max) throws -> Bool {
        if start == end {
            start = 0
            end = 0
        } else if end == storage.count {
            if start > 0 {
                storage.replaceSubrange(0..<(end - start), with: storage[start..<end])
                end -= start
                start = 0
            } else {
                // A head longer than the buffer: grow, callers enforce their own limits.
                storage.append(contentsOf: [UInt8](repeating: 0, count: storage.count))
            }
        }
        let room = min(storage.count - end, maxReadSize, atMost)
        let received = try storage.withUnsafeMutableBytes { raw in
            try Socket.receive(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[end..<(end + room)]), deadline: deadline)
        }
        end += received
        totalBytesReceived += received
        if received > 0 { onReceive(received) }
        return received > 0
    }
}

/// What a chunked body carried besides its data: the chunk sizes as sent, extensions, trailers.
struct ChunkedBodyInfo: Sendable {
    var chunkSizes: [Int] = []
    var extensions: [String] = []
    var trailers = HTTPHeaders()
}

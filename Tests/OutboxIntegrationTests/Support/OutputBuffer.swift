import Glibc

/// Bytes gathered with memcpy and written to a socket in one go, so that a head and its first
/// body piece (or a chunk and its framing) leave in a single send.
struct OutputBuffer {
    let fd: Int32
    private var storage = [UInt8](repeating: 0, count: 80 * 1024)
    private var count = 0

    /// An empty buffer writing to `fd`.
    init(fd: Int32) {
        self.fd = fd
    }

    /// Queues `bytes`.
    mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Queues `bytes`, growing the buffer when needed.
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if count + bytes.count > storage.count {
            storage += [UInt8](repeating: 0, count: count + bytes.count - storage.count)
        }
        let offset = count
        storage.withUnsafeMutableBytes { raw in
            UnsafeMutableRawBufferPointer(rebasing: raw[offset..<(offset + bytes.count)]).copyMemory(from: bytes)
        }
        count += bytes.count
    }

    /// Writes everything queued, blocking until the peer takes it.
    mutating func flush() throws {
        guard count > 0 else { return }
        let length = count
        try storage.withUnsafeBytes { try Socket.sendAll(fd, UnsafeRawBufferPointer(rebasing: $0[0..<length]), deadline: nil) }
        count = 0
    }
}

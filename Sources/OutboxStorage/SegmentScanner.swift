import Glibc

/// Reads a segment's records front to back with large sequential reads (1 MiB or one record,
/// whichever is larger) and stops at the first frame that is not a whole, checksummed record.
/// Used by recovery (which then cuts the file there) and by compaction.
struct SegmentScanner {
    /// Where valid data ends, and why scanning stopped before the end of the file (nil: it did not).
    struct End {
        var validEnd: Int64
        var damage: String?
        /// Only zeros follow the last record: the stretch the writer zeroes ahead of its data
        /// (or a filesystem's zero fill), not damage.
        var zeroedTail = false
    }

    static let chunkSize = 1 << 20

    private let fd: Int32
    private let path: String
    private let fileSize: Int64
    private var buffer: [UInt8]
    /// File offset of `buffer[0]`; `filled` bytes of the buffer hold file data.
    private var bufferOffset: Int64
    private var filled = 0

    init(fd: Int32, path: String, fileSize: Int64, start: Int64) {
        self.fd = fd
        self.path = path
        self.fileSize = fileSize
        buffer = [UInt8](repeating: 0, count: Self.chunkSize)
        bufferOffset = start
    }

    /// Calls `visit(offset, frameLength, type, payload)` for every valid record from `start`.
    /// The payload is only valid during the call. Throws only when a read fails (EIO): damage
    /// is reported in the result, never thrown.
    mutating func scan(from start: Int64,
                       visit: (Int64, Int, UInt8, UnsafeRawBufferPointer) -> Void) throws(StorageError) -> End {
        var position = start
        while true {
            let remaining = fileSize - position
            if remaining == 0 { return End(validEnd: position, damage: nil) }
            if remaining < Int64(RecordFrame.headerSize) + 1 {
                return try isZero(from: position) ? Self.zeroedTail(at: position) : End(validEnd: position, damage: "torn record header")
            }
            try ensure(RecordFrame.headerSize, at: position)
            let header = buffer.withUnsafeBytes { raw in
                RecordFrame.readHeader(UnsafeRawBufferPointer(rebasing: raw[Int(position - bufferOffset)...]))
            }
            switch header {
            case .endOfData:
                return try isZero(from: position) ? Self.zeroedTail(at: position) : End(validEnd: position, damage: "zero length record")
            case .badLength(let length):
                return End(validEnd: position, damage: "impossible record length \(length)")
            case .frame(let length, let checksum):
                let frameLength = RecordFrame.headerSize + length
                guard Int64(frameLength) <= remaining else {
                    return End(validEnd: position, damage: "torn record (\(frameLength) bytes, \(remaining) in file)")
                }
                try ensure(frameLength, at: position)
                let valid = buffer.withUnsafeBytes { raw -> Bool in
                    let start = Int(position - bufferOffset) + RecordFrame.headerSize
                    let body = UnsafeRawBufferPointer(rebasing: raw[start..<(start + length)])
                    guard CRC32C.checksum(body) == checksum else { return false }
                    visit(position, frameLength, body[0], UnsafeRawBufferPointer(rebasing: body[1...]))
                    return true
                }
                guard valid else { return End(validEnd: position, damage: "checksum mismatch") }
                position += Int64(frameLength)
            }
        }
    }

    private static func zeroedTail(at position: Int64) -> End {
        End(validEnd: position, damage: "zeroed tail", zeroedTail: true)
    }

    /// Makes file bytes `position ..< position + count` available in `buffer`.
    private mutating func ensure(_ count: Int, at position: Int64) throws(StorageError) {
        if position >= bufferOffset, position + Int64(count) <= bufferOffset + Int64(filled) { return }
        let keepStart = Int(position - bufferOffset)
        let keep = (keepStart >= 0 && keepStart < filled) ? filled - keepStart : 0
        if keep > 0 {
            buffer.withUnsafeMutableBytes { raw in
                guard let base = raw.baseAddress else { return }
                (base).copyMemory(from: base + keepStart, byteCount: keep)
            }
        }
        bufferOffset = position
        filled = keep
        if count > buffer.count {
            buffer.append(contentsOf: [UInt8](repeating: 0, count: count - buffer.count))
        }
        while filled < count {
            let got = buffer.withUnsafeMutableBytes { raw in
                SegmentFile.readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[filled...]),
                                      at: bufferOffset + Int64(filled))
            }
            if got < 0 { throw .io("read \(path): \(String(cString: strerror(errno)))") }
            if got == 0 { throw .io("read \(path): file shrank while being read") }
            filled += got
        }
    }

    /// True when every byte from `position` to the end of the file is zero.
    private mutating func isZero(from position: Int64) throws(StorageError) -> Bool {
        var offset = position
        while offset < fileSize {
            let count = Int(min(Int64(Self.chunkSize), fileSize - offset))
            try ensure(count, at: offset)
            let zero = buffer.withUnsafeBytes { raw -> Bool in
                // All bytes equal the first, and the first is zero: one memcmp of the range
                // against itself shifted by a byte. Over a 54 MiB zeroed tail a byte-wise loop
                // took 11 s in a debug build, and startup went from 200 to 100 ms in release.
                guard let base = raw.baseAddress.map({ $0 + Int(offset - bufferOffset) }) else { return true }
                return base.load(as: UInt8.self) == 0 && memcmp(base, base + 1, count - 1) == 0
            }
            if !zero { return false }
            offset += Int64(count)
        }
        return true
    }
}

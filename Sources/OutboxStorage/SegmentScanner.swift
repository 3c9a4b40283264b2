import Glibc

/// Reads a segment's records front to back with large sequential reads (1 MiB or one record,
/// whichever is larger), hands every valid record to its caller, and reports the bytes where
/// records should be but none checks. Used by recovery (which keeps those bytes aside and cuts
/// or covers them) and by compaction (which leaves a damaged segment alone).
///
/// In a version 2 segment a bad frame is not the end: a frame whose header checks but whose
/// payload does not is skipped by its length (one record lost); where no header checks, the
/// scanner moves byte by byte to the next header that does (``RecordFrame``). A stretch that
/// such a record follows is *damage*; one that reaches the end of the file is the *tail*. In a
/// version 1 segment the first bad frame starts the tail: nothing says where the next one is.
struct SegmentScanner {
    enum Framing: Equatable {
        /// Version 2 frames, checked for their place in segment `segment`.
        case current(segment: UInt32)
        /// Version 1 frames (``LegacyRecordFrame``).
        case legacy
    }

    /// Bytes where records should be but none checks.
    struct Damage: Equatable {
        var start: Int64
        var end: Int64
        /// Records lost in it: one per frame whose header checked but whose payload did not, and
        /// one per stretch where no header checked (which may have held more: a lower bound).
        var skipped: Int
        /// Why the first bad frame is not a record.
        var reason: String

        var count: Int64 { end - start }
    }

    /// What a scan found besides the records.
    struct End {
        /// Where the last valid record ends (the file's size when nothing follows it).
        var validEnd: Int64
        /// Damage that valid records follow, in file order (version 2 only).
        var damages: [Damage] = []
        /// From `validEnd` to the end of the file, when anything is there.
        var tail: Damage?
        /// The tail holds zeros only: the stretch the writer zeroes ahead of its data (or a
        /// filesystem's zero fill), not damage.
        var zeroedTail = false
    }

    static let chunkSize = 1 << 20

    private let fd: Int32
    private let path: String
    private let fileSize: Int64
    private let framing: Framing
    private var buffer: [UInt8]
    /// File offset of `buffer[0]`; `filled` bytes of the buffer hold file data.
    private var bufferOffset: Int64
    private var filled = 0

    init(fd: Int32, path: String, fileSize: Int64, start: Int64, framing: Framing) {
        self.fd = fd
        self.path = path
        self.fileSize = fileSize
        self.framing = framing
        buffer = [UInt8](repeating: 0, count: Self.chunkSize)
        bufferOffset = start
    }

    /// What the bytes at one offset are.
    private enum Probe {
        /// A whole, checked record; its payload is at `payload` in `buffer`.
        case record(frameLength: Int, type: UInt8, payload: Range<Int>)
        /// A header that checks, over a payload that does not.
        case badPayload(frameLength: Int)
        case badHeader(String)
    }

    /// Calls `visit(offset, frameLength, type, payload)` for every valid record from `start`.
    /// The payload is only valid during the call. Throws only when a read fails (EIO): damage
    /// is reported in the result, never thrown.
    mutating func scan(from start: Int64,
                       visit: (Int64, Int, UInt8, UnsafeRawBufferPointer) -> Void) throws(StorageError) -> End {
        var position = start
        var damages: [Damage] = []
        // Bad bytes that no valid record has followed yet.
        var open: Damage?
        while position < fileSize {
            switch try probe(position) {
            case .record(let frameLength, let type, let payload):
                if var stretch = open {
                    stretch.end = position
                    damages.append(stretch)
                    open = nil
                }
                buffer.withUnsafeBytes { visit(position, frameLength, type, UnsafeRawBufferPointer(rebasing: $0[payload])) }
                position += Int64(frameLength)
            case .badPayload(let frameLength):
                var stretch = open ?? Damage(start: position, end: position, skipped: 0, reason: "checksum mismatch")
                stretch.skipped += 1
                guard framing != .legacy else {
                    // A version 1 length is not checked: it cannot be trusted to skip by.
                    stretch.end = fileSize
                    return End(validEnd: stretch.start, damages: damages, tail: stretch)
                }
                open = stretch
                position += Int64(frameLength)
            case .badHeader(let reason):
                if open == nil, try isZero(from: position) {
                    return End(validEnd: position, damages: damages,
                               tail: Damage(start: position, end: fileSize, skipped: 0, reason: "zeroed tail"), zeroedTail: true)
                }
                var stretch = open ?? Damage(start: position, end: position, skipped: 0, reason: reason)
                stretch.skipped += 1
                guard case .current(let segment) = framing, let next = try nextHeader(after: position, segment: segment) else {
                    stretch.end = fileSize
                    return End(validEnd: stretch.start, damages: damages, tail: stretch)
                }
                open = stretch
                position = next
            }
        }
        if var stretch = open {
            stretch.end = fileSize
            return End(validEnd: stretch.start, damages: damages, tail: stretch)
        }
        return End(validEnd: position, damages: damages)
    }

    private mutating func probe(_ position: Int64) throws(StorageError) -> Probe {
        let remaining = fileSize - position
        switch framing {
        case .current(let segment):
            let headerSize = RecordFrame.headerSize
            guard remaining >= Int64(headerSize) else { return .badHeader("torn record header") }
            try ensure(headerSize, at: position)
            let at = Int(position - bufferOffset)
            let header = buffer.withUnsafeBytes { RecordFrame.readHeader(UnsafeRawBufferPointer(rebasing: $0[at...]), segment: segment, offset: position) }
            let (type, length, checksum): (UInt8, Int, UInt32)
            switch header {
            case .invalid(let reason): return .badHeader(reason)
            case .frame(let frameType, let frameLength, let frameChecksum): (type, length, checksum) = (frameType, frameLength, frameChecksum)
            }
            let frameLength = headerSize + length
            guard Int64(frameLength) <= remaining else { return .badHeader("torn record (\(frameLength) bytes, \(remaining) in file)") }
            return try checked(position, frameLength: frameLength, type: type, payloadAt: headerSize, checksum: checksum)
        case .legacy:
            let headerSize = LegacyRecordFrame.headerSize
            guard remaining >= Int64(headerSize) + 1 else { return .badHeader("torn record header") }
            try ensure(headerSize, at: position)
            let at = Int(position - bufferOffset)
            let header = buffer.withUnsafeBytes { raw in
                (LegacyRecordFrame.readHeader(UnsafeRawBufferPointer(rebasing: raw[at...])),
                 raw.loadUnaligned(fromByteOffset: at, as: UInt32.self))
            }
            guard let (length, checksum) = header.0 else {
                return .badHeader(header.1 == 0 ? "zero length record" : "impossible record length \(UInt32(littleEndian: header.1))")
            }
            let frameLength = headerSize + length
            guard Int64(frameLength) <= remaining else { return .badHeader("torn record (\(frameLength) bytes, \(remaining) in file)") }
            // The checksum covers the type byte, which leads the payload.
            guard case .record(_, _, let body) = try checked(position, frameLength: frameLength, type: 0, payloadAt: headerSize,
                                                             checksum: checksum) else { return .badPayload(frameLength: frameLength) }
            return .record(frameLength: frameLength, type: buffer[body.lowerBound], payload: (body.lowerBound + 1)..<body.upperBound)
        }
    }

    /// The frame at `position` once its payload (from `payloadAt` within the frame) is read and
    /// checked against `checksum`.
    private mutating func checked(_ position: Int64, frameLength: Int, type: UInt8, payloadAt: Int,
                                  checksum: UInt32) throws(StorageError) -> Probe {
        try ensure(frameLength, at: position)
        let payload = (Int(position - bufferOffset) + payloadAt)..<(Int(position - bufferOffset) + frameLength)
        let valid = buffer.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[payload])) == checksum }
        return valid ? .record(frameLength: frameLength, type: type, payload: payload) : .badPayload(frameLength: frameLength)
    }

    /// The first offset after `position` where a version 2 header of `segment` checks and its
    /// frame fits in the file; nil when there is none. A `memchr` for the magic byte, then the
    /// header check (one CRC of 10 bytes and one of 12) at each hit.
    private mutating func nextHeader(after position: Int64, segment: UInt32) throws(StorageError) -> Int64? {
        let headerSize = RecordFrame.headerSize
        let fileSize = fileSize
        var from = position + 1
        while fileSize - from >= Int64(headerSize) {
            let count = Int(min(Int64(Self.chunkSize), fileSize - from))
            try ensure(count, at: from)
            // Offsets from `from` where a whole header fits in what was read.
            let candidates = count - headerSize + 1
            let at = Int(from - bufferOffset)
            let start = from
            let found: Int64? = buffer.withUnsafeBytes { raw in
                guard let base = raw.baseAddress.map({ $0 + at }) else { return nil }
                var searched = 0
                while searched < candidates, let hit = memchr(base + searched, Int32(RecordFrame.magic), candidates - searched) {
                    let index = base.distance(to: UnsafeRawPointer(hit))
                    let offset = start + Int64(index)
                    let header = RecordFrame.readHeader(UnsafeRawBufferPointer(start: base + index, count: headerSize),
                                                        segment: segment, offset: offset)
                    if case .frame(_, let length, _) = header, offset + Int64(headerSize + length) <= fileSize { return offset }
                    searched = index + 1
                }
                return nil
            }
            if let found { return found }
            from += Int64(candidates)
        }
        return nil
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

import Glibc
import OutboxModel

/// Reading a `created` record piece by piece, for the admin view of an operation whose body may
/// be megabytes: the record is checked (length, checksum) in pieces of ``pieceBytes``, never
/// read whole, and its body is handed out as a ``LogBytes`` range to be read again by offset.
///
/// The bytes of a record never change once its append completed: compaction writes new files
/// and renames them over old ones, and a `LogBytes` keeps its ``SegmentFile`` (and so the old
/// file's descriptor) open, so a range read after the check reads what was checked.
extension OperationLog {
    /// How much of a record is read at a time.
    static let pieceBytes = 64 * 1024

    /// The request of the `created` record at `location` without its body, and the body as a
    /// range of the log. Every byte of the record is read once, in pieces: the checksum is
    /// computed over all of them and the body's bytes pass through `visitBody` in order, so a
    /// caller learns what it needs of the body (its form as JSON) in the same pass. Throws
    /// `.corrupt` when the record is not a whole, valid `created` record.
    package func readRequestHead(at location: RecordLocation,
                                 visitingBody visitBody: (UnsafeRawBufferPointer) -> Void) throws(StorageError)
        -> (request: OperationRequest, body: LogBytes) {
        let file = try segmentFile(holding: location)
        let frameLength = Int(location.length)
        let place = "record at segment \(location.segment) offset \(location.offset)"
        guard frameLength > FrameLayout.payloadStart else { throw .corrupt("\(place) is shorter than its header") }
        let piece = UnsafeMutableRawBufferPointer.allocate(byteCount: min(frameLength, Self.pieceBytes), alignment: 8)
        defer { piece.deallocate() }
        // The frame from its start until the request before the body decodes (small: the
        // headers), then nothing.
        var head: [UInt8] = []
        var frameHeader: FrameLayout.Header?
        var decoded: (request: OperationRequest, body: Range<Int>)?
        var checksum: UInt32 = 0
        var position = 0
        while position < frameLength {
            let count = min(piece.count, frameLength - position)
            let bytes = UnsafeMutableRawBufferPointer(rebasing: piece[..<count])
            let got = SegmentFile.readFully(file.fd, into: bytes, at: Int64(location.offset) + Int64(position))
            guard got >= 0 else { throw .io("read \(file.path): \(String(cString: strerror(errno)))") }
            guard got == count else { throw .corrupt("\(file.path): \(place) runs past the end of the file") }
            let read = UnsafeRawBufferPointer(bytes)
            let covered = max(0, FrameLayout.checksumStart - position)
            if covered < count { checksum = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: read[covered...]), seed: checksum) }
            if let decoded {
                Self.visit(decoded.body, of: read, at: position, visitBody)
            } else {
                head.append(contentsOf: read)
                if head.count > FrameLayout.payloadStart {
                    let attempt = head.withUnsafeBytes { frame in
                        Result { () throws(StorageError) -> RequestHead? in
                            try Self.decodeRequestHead(frame, at: location, isWhole: frame.count == frameLength, place: place)
                        }
                    }
                    if let found = try attempt.get() {
                        frameHeader = found.header
                        guard found.body.upperBound <= frameLength else { throw .corrupt("\(place): the body runs past the record") }
                        decoded = (found.request, found.body)
                        head.withUnsafeBytes { Self.visit(found.body, of: $0, at: 0, visitBody) }
                        head = []
                    }
                }
            }
            position += count
        }
        guard let frameHeader, frameHeader.payloadLength == frameLength - FrameLayout.payloadStart else {
            throw .corrupt("\(place): record length does not match its location")
        }
        guard checksum == frameHeader.checksum else { throw .corrupt("\(place): record checksum mismatch") }
        guard let decoded else { throw .corrupt("\(place): record payload does not parse") }
        let body = LogBytes(file: file, start: location.offset + UInt64(decoded.body.lowerBound), count: decoded.body.count)
        return (decoded.request, body)
    }

    /// The frame header, the request and the body's place in the frame, from the frame's first
    /// bytes; nil while they end too soon.
    private typealias RequestHead = (header: FrameLayout.Header, request: OperationRequest, body: Range<Int>)

    private static func decodeRequestHead(_ frame: UnsafeRawBufferPointer, at location: RecordLocation, isWhole: Bool,
                                          place: String) throws(StorageError) -> RequestHead? {
        guard let header = FrameLayout.header(frame, at: location) else { throw .corrupt("\(place): no record header at the location") }
        guard header.type == RecordFrame.RecordType.created.rawValue else { throw .corrupt("\(place) is not a created record") }
        let start = FrameLayout.payloadStart
        let found: (request: OperationRequest, body: Range<Int>)?
        do {
            found = try RecordCodec.decodeRequestHead(payload: UnsafeRawBufferPointer(rebasing: frame[start...]), isWhole: isWhole)
        } catch {
            throw .corrupt("\(place): record payload does not parse")
        }
        guard let found else { return nil }
        return (header, found.request, (found.body.lowerBound + start)..<(found.body.upperBound + start))
    }

    /// Passes the part of `bytes` (which start at `position` in the frame) that lies in `body`.
    private static func visit(_ body: Range<Int>, of bytes: UnsafeRawBufferPointer, at position: Int,
                              _ visitBody: (UnsafeRawBufferPointer) -> Void) {
        let from = max(body.lowerBound, position)
        let to = min(body.upperBound, position + bytes.count)
        if from < to { visitBody(UnsafeRawBufferPointer(rebasing: bytes[(from - position)..<(to - position)])) }
    }
}

/// What this reader needs to know of `RecordFrame`'s layout, in one place: where the header's
/// fields are, where the payload starts and what the checksum covers.
private enum FrameLayout {
    struct Header {
        var type: UInt8
        var payloadLength: Int
        var checksum: UInt32
    }

    /// The payload follows the frame header (which holds the type).
    static let payloadStart = RecordFrame.headerSize
    /// The payload checksum covers the payload alone (the header has a check of its own).
    static let checksumStart = RecordFrame.headerSize

    /// The header at the start of `frame` (at least `payloadStart` bytes), checked for the place
    /// `location` names; nil when it is none.
    static func header(_ frame: UnsafeRawBufferPointer, at location: RecordLocation) -> Header? {
        guard case .frame(let type, let length, let checksum) = RecordFrame.readHeader(frame, segment: location.segment,
                                                                                      offset: Int64(location.offset)) else { return nil }
        return Header(type: type, payloadLength: length, checksum: checksum)
    }
}

/// A range of bytes in one segment file (a record's body), read by offset: the file stays open
/// while this value lives, so the range stays readable even after compaction replaced the file.
package struct LogBytes: ByteSource {
    let file: SegmentFile
    /// Where the range starts in the file.
    let start: UInt64
    package let count: Int

    package func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(ByteSourceError) {
        guard offset >= 0, offset + buffer.count <= count else {
            throw ByteSourceError("read of \(buffer.count) bytes at \(offset) past the end of \(count)")
        }
        let got = SegmentFile.readFully(file.fd, into: buffer, at: Int64(start) + Int64(offset))
        guard got >= 0 else { throw ByteSourceError("read \(file.path): \(String(cString: strerror(errno)))") }
        guard got == buffer.count else { throw ByteSourceError("\(file.path) ends before the body does") }
    }
}

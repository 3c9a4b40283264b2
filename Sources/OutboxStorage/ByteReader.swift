import Foundation

/// Reads little-endian fields from a bounded buffer; every read is bounds-checked and throws
/// `ByteReader.OutOfBounds` instead of trapping, so bad bytes can never crash recovery.
struct ByteReader {
    /// A field ran past the end of the buffer, or a length was impossible.
    struct OutOfBounds: Error {}

    let buffer: UnsafeRawBufferPointer
    private(set) var position = 0

    init(_ buffer: UnsafeRawBufferPointer) {
        self.buffer = buffer
    }

    var remaining: Int { buffer.count - position }

    mutating func bytes(_ count: Int) throws(OutOfBounds) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= remaining else { throw OutOfBounds() }
        let slice = UnsafeRawBufferPointer(rebasing: buffer[position..<(position + count)])
        position += count
        return slice
    }

    mutating func skip(_ count: Int) throws(OutOfBounds) {
        _ = try bytes(count)
    }

    mutating func u8() throws(OutOfBounds) -> UInt8 {
        guard remaining >= 1 else { throw OutOfBounds() }
        defer { position += 1 }
        return buffer[position]
    }

    mutating func u16() throws(OutOfBounds) -> UInt16 {
        UInt16(littleEndian: try bytes(2).loadUnaligned(as: UInt16.self))
    }

    mutating func u32() throws(OutOfBounds) -> UInt32 {
        UInt32(littleEndian: try bytes(4).loadUnaligned(as: UInt32.self))
    }

    mutating func i64() throws(OutOfBounds) -> Int64 {
        Int64(littleEndian: try bytes(8).loadUnaligned(as: Int64.self))
    }

    mutating func uuid() throws(OutOfBounds) -> UUID {
        UUID(uuid: try bytes(16).loadUnaligned(as: uuid_t.self))
    }

    mutating func string() throws(OutOfBounds) -> String {
        String(decoding: try blobBytes(), as: UTF8.self)
    }

    mutating func blob() throws(OutOfBounds) -> [UInt8] {
        Array(try blobBytes())
    }

    mutating func blobBytes() throws(OutOfBounds) -> UnsafeRawBufferPointer {
        try bytes(Int(try u32()))
    }
}

import CSystem

/// The frame around every record (little endian, `docs/storage.md`):
///
/// ```
///  0        4        8      9
///  +--------+--------+------+----------------------+
///  | length | crc32c | type | payload ...          |
///  +--------+--------+------+----------------------+
///  length = 1 + payload bytes; crc32c over type + payload
/// ```
///
/// A length of 0 marks the end of data (a zeroed or preallocated tail).
enum RecordFrame {
    static let headerSize = 8
    /// No record is larger; a longer length field is damage, never a reason to allocate.
    static let maxLength = 1 << 30

    enum RecordType: UInt8 {
        case created = 1
        case updated = 2
        case deleted = 3
    }

    /// Fills the length and checksum of a frame whose bytes from offset 8 on are type + payload.
    static func seal(_ writer: inout ByteWriter) {
        let length = writer.count - headerSize
        let checksum = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: writer.written[headerSize...]))
        writer.patchU32(UInt32(truncatingIfNeeded: length), at: 0)
        writer.patchU32(checksum, at: 4)
    }

    /// What a frame header at the start of `bytes` says, before its body is checked.
    enum HeaderCheck: Equatable {
        /// Length 0: no more records here.
        case endOfData
        case frame(length: Int, checksum: UInt32)
        case badLength(UInt32)
    }

    static func readHeader(_ bytes: UnsafeRawBufferPointer) -> HeaderCheck {
        let length = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
        let checksum = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        if length == 0 { return .endOfData }
        guard length <= maxLength else { return .badLength(length) }
        return .frame(length: Int(length), checksum: checksum)
    }
}

/// CRC-32C (Castagnoli) as computed by the C shim (SSE4.2 instruction or table fallback).
enum CRC32C {
    static func checksum(_ bytes: UnsafeRawBufferPointer, seed: UInt32 = 0) -> UInt32 {
        csystem_crc32c(seed, bytes.baseAddress, bytes.count)
    }
}

/// The frame of version 1 segments, read only by the recovery that migrates them
/// (`docs/storage.md`):
///
/// ```
///  0        4        8      9
///  +--------+--------+------+----------------------+
///  | length | crc32c | type | payload ...          |
///  +--------+--------+------+----------------------+
///  length = 1 + payload bytes; crc32c over type + payload
/// ```
///
/// Nothing checks the length before the payload's checksum, so after a bad frame a reader
/// cannot find the next one: the rest of a version 1 segment is lost to damage, which is why
/// version 2 (``RecordFrame``) replaced it.
enum LegacyRecordFrame {
    static let headerSize = 8

    /// The length (type + payload) and checksum of a frame header at the start of `bytes`
    /// (8 of them at least); nil when the length is 0 (end of data) or impossible.
    static func readHeader(_ bytes: UnsafeRawBufferPointer) -> (length: Int, checksum: UInt32)? {
        let length = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
        let checksum = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        guard length > 0, length <= RecordFrame.maxLength else { return nil }
        return (Int(length), checksum)
    }
}

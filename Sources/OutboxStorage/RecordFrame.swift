import CSystem

/// The frame around every record in a version 2 segment (little endian, `docs/storage.md`):
///
/// ```
///  0       1      2          6                10             14
///  +-------+------+----------+----------------+--------------+------------------+
///  | 0xF5  | type | length   | payload crc32c | header check | payload ...      |
///  +-------+------+----------+----------------+--------------+------------------+
///    magic   u8     u32        u32              u32
///  length = payload bytes (≤ 1 GiB)
///  header check = crc32c(bytes 0..<10) XOR crc32c(segment u32 ‖ offset u64 of the frame)
/// ```
///
/// The header carries its own checksum so that a reader can tell a real frame from bytes that
/// merely look like one, without trusting a length it cannot check: after damage it moves
/// byte by byte (a `memchr` for the magic, then one CRC of 10 bytes per candidate) to the next
/// header that checks. The check is bound to where the frame lies (segment and offset), so a
/// frame copied anywhere else, such as a record of another log inside a stored body, never
/// checks: CRC-32C catches every difference confined to 32 bits, and two offsets of one
/// segment differ only in their low 32 bits.
///
/// Appenders fill the header with the check of bytes 0..<10 alone (``seal(_:type:)``); the
/// writer, which alone knows where the batch goes, folds the place in (``place(_:segment:offset:)``)
/// just before the write.
enum RecordFrame {
    static let headerSize = 14
    /// No record's payload is larger; a longer length field is damage, never a reason to allocate.
    static let maxLength = 1 << 30
    /// The first byte of every frame: a byte that never occurs in UTF-8 text (JSON bodies), so
    /// that a scan for the next frame skips most payload bytes with `memchr`.
    static let magic: UInt8 = 0xF5

    enum RecordType: UInt8 {
        /// Bytes recovery found damaged, kept aside in `damaged/`, and overwrote with this frame
        /// so that the next start reads past them without noticing them again.
        case padding = 0
        case created = 1
        case updated = 2
        case deleted = 3
    }

    /// What the header at the start of some bytes says.
    enum Header: Equatable {
        case frame(type: UInt8, length: Int, checksum: UInt32)
        /// Not a header written for this place; the reason as the log says it.
        case invalid(String)
    }

    /// Fills the header of a frame whose payload (from `headerSize` on) is written, with the
    /// check of the header alone: ``place(_:segment:offset:)`` completes it.
    static func seal(_ frame: UnsafeMutableRawBufferPointer, type: UInt8) {
        let payload = UnsafeRawBufferPointer(rebasing: frame[headerSize...])
        frame.storeBytes(of: magic, toByteOffset: 0, as: UInt8.self)
        frame.storeBytes(of: type, toByteOffset: 1, as: UInt8.self)
        frame.storeBytes(of: UInt32(truncatingIfNeeded: payload.count).littleEndian, toByteOffset: 2, as: UInt32.self)
        frame.storeBytes(of: CRC32C.checksum(payload).littleEndian, toByteOffset: 6, as: UInt32.self)
        frame.storeBytes(of: headerChecksum(UnsafeRawBufferPointer(frame)).littleEndian, toByteOffset: 10, as: UInt32.self)
    }

    /// Binds the sealed frame at the start of `frame` to where it is written.
    static func place(_ frame: UnsafeMutableRawPointer, segment: UInt32, offset: Int64) {
        let check = UInt32(littleEndian: frame.loadUnaligned(fromByteOffset: 10, as: UInt32.self))
        frame.storeBytes(of: (check ^ placeChecksum(segment: segment, offset: offset)).littleEndian, toByteOffset: 10, as: UInt32.self)
    }

    /// Moves a placed frame from one offset of its segment to another (compaction).
    static func move(_ frame: UnsafeMutableRawPointer, segment: UInt32, from: Int64, to: Int64) {
        place(frame, segment: segment, offset: from)
        place(frame, segment: segment, offset: to)
    }

    /// Reads the header at the start of `bytes` (at least `headerSize` of them) as the frame at
    /// `offset` of `segment`: a frame only if its magic and check hold and its length is possible.
    static func readHeader(_ bytes: UnsafeRawBufferPointer, segment: UInt32, offset: Int64) -> Header {
        let length = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 2, as: UInt32.self))
        let stored = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 10, as: UInt32.self))
        guard bytes[0] == magic, stored == headerChecksum(bytes) ^ placeChecksum(segment: segment, offset: offset) else {
            let zero = bytes[..<headerSize].allSatisfy { $0 == 0 }
            return .invalid(zero ? "zero length record" : "bad record header")
        }
        // A checked header with an impossible length was written so by a bug, not by damage.
        guard length <= maxLength else { return .invalid("impossible record length \(length)") }
        let checksum = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 6, as: UInt32.self))
        return .frame(type: bytes[1], length: Int(length), checksum: checksum)
    }

    /// The header of a padding frame of `count` bytes in all (at least `headerSize`) for `offset`
    /// of `segment`; its payload is `count - headerSize` zero bytes, whose checksum is given.
    static func paddingHeader(count: Int, zeroChecksum: UInt32, segment: UInt32, offset: Int64) -> [UInt8] {
        var header = [UInt8](repeating: 0, count: headerSize)
        header.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: magic, toByteOffset: 0, as: UInt8.self)
            raw.storeBytes(of: RecordType.padding.rawValue, toByteOffset: 1, as: UInt8.self)
            raw.storeBytes(of: UInt32(count - headerSize).littleEndian, toByteOffset: 2, as: UInt32.self)
            raw.storeBytes(of: zeroChecksum.littleEndian, toByteOffset: 6, as: UInt32.self)
            raw.storeBytes(of: headerChecksum(UnsafeRawBufferPointer(raw)).littleEndian, toByteOffset: 10, as: UInt32.self)
            if let base = raw.baseAddress { place(base, segment: segment, offset: offset) }
        }
        return header
    }

    private static func headerChecksum(_ header: UnsafeRawBufferPointer) -> UInt32 {
        CRC32C.checksum(UnsafeRawBufferPointer(rebasing: header[..<10]))
    }

    private static func placeChecksum(segment: UInt32, offset: Int64) -> UInt32 {
        // segment u32 ‖ offset u64, little endian: three u32s, 12 bytes without padding.
        var place = (segment.littleEndian, UInt32(truncatingIfNeeded: offset).littleEndian,
                     UInt32(truncatingIfNeeded: offset >> 32).littleEndian)
        return withUnsafeBytes(of: &place) { CRC32C.checksum($0) }
    }
}

/// CRC-32C (Castagnoli) as computed by the C shim (SSE4.2 instruction or table fallback).
enum CRC32C {
    static func checksum(_ bytes: UnsafeRawBufferPointer, seed: UInt32 = 0) -> UInt32 {
        csystem_crc32c(seed, bytes.baseAddress, bytes.count)
    }
}

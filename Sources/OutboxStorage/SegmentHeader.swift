/// The first 32 bytes of every segment file, so that a stray file is never read as a log:
///
/// ```
///  0         6         8         12           16              28        32
///  +---------+---------+---------+------------+---------------+---------+
///  | "OBXLOG"| version | segment | generation | reserved (0)  | crc32c  |
///  +---------+---------+---------+------------+---------------+---------+
///             u16 = 2    u32       u32                          over 0..<28
/// ```
///
/// Version 2 frames records as ``RecordFrame`` draws; version 1 (``LegacyRecordFrame``) is
/// only read, by the recovery that migrates it.
struct SegmentHeader: Equatable {
    static let size = 32
    /// What new segments are written as.
    static let currentVersion: UInt16 = 2
    static let legacyVersion: UInt16 = 1
    private static let magic = Array("OBXLOG".utf8)

    var segment: UInt32
    var generation: UInt32
    var version = currentVersion

    func encoded() -> [UInt8] {
        ByteWriter.bytes(count: Self.size) { writer in
            Self.magic.withUnsafeBytes { writer.raw($0) }
            writer.u16(version)
            writer.u32(segment)
            writer.u32(generation)
            writer.i64(0)
            writer.u32(0)
            writer.u32(CRC32C.checksum(writer.written))
        }
    }

    /// The header in `bytes`, or nil when the magic, version (1 or 2) or checksum is wrong.
    init?(decoding bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= Self.size, Array(bytes[0..<6]) == Self.magic else { return nil }
        var reader = ByteReader(bytes)
        do {
            try reader.skip(6)
            version = try reader.u16()
            guard version == Self.currentVersion || version == Self.legacyVersion else { return nil }
            segment = try reader.u32()
            generation = try reader.u32()
            try reader.skip(12)
            let checksum = try reader.u32()
            guard CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<28])) == checksum else { return nil }
        } catch {
            return nil
        }
    }

    init(segment: UInt32, generation: UInt32, version: UInt16 = currentVersion) {
        self.segment = segment
        self.generation = generation
        self.version = version
    }
}

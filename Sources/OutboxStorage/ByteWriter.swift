import Foundation

/// Appends little-endian fields to a byte array: the encoding half of the record format
/// (`docs/storage.md`). Every variable-length field is a `u32` length then its bytes.
struct ByteWriter {
    var bytes: [UInt8]

    init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    mutating func u8(_ value: UInt8) { bytes.append(value) }

    mutating func u16(_ value: UInt16) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func u32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func i64(_ value: Int64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func uuid(_ value: UUID) {
        withUnsafeBytes(of: value.uuid) { bytes.append(contentsOf: $0) }
    }

    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            u32(UInt32(truncatingIfNeeded: utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func blob(_ value: [UInt8]) {
        u32(UInt32(truncatingIfNeeded: value.count))
        bytes.append(contentsOf: value)
    }

    /// Overwrites 4 bytes at `offset` (a length or checksum filled in after the payload).
    mutating func patchU32(_ value: UInt32, at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for index in 0..<4 { bytes[offset + index] = raw[index] }
        }
    }
}

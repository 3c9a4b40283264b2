import Foundation
import OutboxModel

/// Where the record encoder puts its little-endian fields (`docs/storage.md`): a
/// ``ByteCounter`` measures a record, a ``ByteWriter`` then writes it into a buffer of exactly
/// that size. Both walk the same encoding function, so the size can never disagree with what
/// is written; every variable-length field is a `u32` length then its bytes.
protocol ByteSink {
    mutating func u8(_ value: UInt8)
    mutating func u16(_ value: UInt16)
    mutating func u32(_ value: UInt32)
    mutating func i64(_ value: Int64)
    mutating func uuid(_ value: UUID)
    mutating func raw(_ bytes: UnsafeRawBufferPointer)
    /// The bytes of a spilled request body, copied from its file in pieces.
    mutating func raw(_ body: SpilledBody)
}

extension ByteSink {
    mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            u32(UInt32(truncatingIfNeeded: utf8.count))
            raw(UnsafeRawBufferPointer(utf8))
        }
    }

    mutating func blob(_ value: [UInt8]) {
        u32(UInt32(truncatingIfNeeded: value.count))
        value.withUnsafeBytes { raw($0) }
    }

    /// A spilled body as a blob: the same bytes on disk as the array it stands for.
    mutating func blob(_ body: SpilledBody) {
        u32(UInt32(truncatingIfNeeded: body.count))
        raw(body)
    }
}

/// Counts the bytes an encoding would write.
struct ByteCounter: ByteSink {
    private(set) var count = 0

    mutating func u8(_ value: UInt8) { count += 1 }
    mutating func u16(_ value: UInt16) { count += 2 }
    mutating func u32(_ value: UInt32) { count += 4 }
    mutating func i64(_ value: Int64) { count += 8 }
    mutating func uuid(_ value: UUID) { count += 16 }
    mutating func raw(_ bytes: UnsafeRawBufferPointer) { count += bytes.count }
    mutating func raw(_ body: SpilledBody) { count += body.count }
}

/// Writes fields into memory sized beforehand by a ``ByteCounter``: a store and a pointer bump
/// per field. (Appending each field to an array cost a capacity and uniqueness check per field,
/// about a hundred instructions each: the encoding of a stored request was a tenth of the
/// durable path's own CPU.) A write past the end stops the process rather than corrupting memory.
struct ByteWriter: ByteSink {
    private let buffer: UnsafeMutableRawBufferPointer
    /// Bytes written so far, from the start of `buffer`.
    private(set) var count: Int
    /// Why a spilled body could not be copied, if one could not: its place holds zeros, and
    /// the encoder must not let the record be written.
    private(set) var spillFailure: SpillFile.Failure?
    /// A spilled body is read straight into the record, a MiB at a time: it never exists as
    /// one array of its own.
    private static let spillPiece = 1 << 20

    init(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int = 0) {
        self.buffer = buffer
        count = offset
    }

    private mutating func store<T: FixedWidthInteger>(_ value: T) {
        let size = MemoryLayout<T>.size
        precondition(count + size <= buffer.count, "record encoding overran its measured size")
        buffer.storeBytes(of: value.littleEndian, toByteOffset: count, as: T.self)
        count += size
    }

    mutating func u8(_ value: UInt8) { store(value) }
    mutating func u16(_ value: UInt16) { store(value) }
    mutating func u32(_ value: UInt32) { store(value) }
    mutating func i64(_ value: Int64) { store(value) }

    mutating func uuid(_ value: UUID) {
        withUnsafeBytes(of: value.uuid) { raw($0) }
    }

    mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        precondition(count + bytes.count <= buffer.count, "record encoding overran its measured size")
        (buffer.baseAddress! + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    mutating func raw(_ body: SpilledBody) {
        precondition(count + body.count <= buffer.count, "record encoding overran its measured size")
        var done = 0
        while done < body.count, spillFailure == nil {
            let piece = min(Self.spillPiece, body.count - done)
            let target = UnsafeMutableRawBufferPointer(rebasing: buffer[(count + done)..<(count + done + piece)])
            spillFailure = body.file.read(into: target, at: done)
            done += piece
        }
        if spillFailure != nil {
            UnsafeMutableRawBufferPointer(rebasing: buffer[count..<(count + body.count)]).initializeMemory(as: UInt8.self, repeating: 0)
        }
        count += body.count
    }

    /// Overwrites 4 bytes at `offset` (a length or checksum filled in after the payload).
    func patchU32(_ value: UInt32, at offset: Int) {
        precondition(offset + 4 <= count, "patch outside the written bytes")
        buffer.storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt32.self)
    }

    /// The bytes written so far.
    var written: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: buffer[..<count]) }

    /// `size` bytes filled by `fill`, which must write exactly that many.
    static func bytes(count size: Int, _ fill: (inout ByteWriter) -> Void) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: size) { storage, initialized in
            var writer = ByteWriter(UnsafeMutableRawBufferPointer(storage))
            fill(&writer)
            precondition(writer.count == size, "record encoding wrote \(writer.count) of its measured \(size) bytes")
            initialized = size
        }
    }
}

/// Bytes kept elsewhere, read by offset piece by piece: an operation's body in the log, which an
/// admin view streams without ever holding it whole (SPEC §6: at most 64 KiB of it buffered per
/// view). Storage provides the log's ranges; an array is one too, for bodies already in memory.
package protocol ByteSource: Sendable {
    /// How many bytes there are.
    var count: Int { get }
    /// Fills `buffer` with the bytes from `offset` on; `offset + buffer.count` is at most `count`.
    func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(ByteSourceError)
}

/// A read of a ``ByteSource`` failed (the disk, a file gone short): what for, in words.
package struct ByteSourceError: Error, Sendable, CustomStringConvertible {
    package var description: String

    package init(_ description: String) {
        self.description = description
    }
}

extension Array: ByteSource where Element == UInt8 {
    package func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(ByteSourceError) {
        guard offset >= 0, offset + buffer.count <= count else {
            throw ByteSourceError("read of \(buffer.count) bytes at \(offset) past the end of \(count)")
        }
        withUnsafeBytes { bytes in buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + buffer.count)])) }
    }
}

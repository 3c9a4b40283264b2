/// What takes the place of damaged bytes once recovery has kept them aside
/// (``DamagedBytes``): frames of type ``RecordFrame/RecordType/padding`` whose payload is
/// zeros, covering the stretch exactly, so that no other record moves (every location handed
/// out stays right) and the next start reads past the stretch without reporting it again.
/// Readers skip them; compaction drops them.
enum PaddingFrame {
    /// Writes padding frames covering `range` of segment `segment` through `write(bytes, offset)`,
    /// front to back; false, with nothing written, when the range is shorter than a frame
    /// header (nothing can cover it: the stretch is then met again at the next start).
    static func cover(_ range: Range<Int64>, segment: UInt32,
                      write: (UnsafeRawBufferPointer, Int64) throws(StorageError) -> Void) throws(StorageError) -> Bool {
        let headerSize = Int64(RecordFrame.headerSize)
        guard range.upperBound - range.lowerBound >= headerSize else { return false }
        let zeros = [UInt8](repeating: 0, count: Int(min(range.upperBound - range.lowerBound, 1 << 20)))
        let largest = headerSize + Int64(RecordFrame.maxLength)
        var offset = range.lowerBound
        while offset < range.upperBound {
            let left = range.upperBound - offset
            var frame = min(left, largest)
            // Never leave less than a header for the next frame.
            if left > frame, left - frame < headerSize { frame -= headerSize }
            let payload = Int(frame - headerSize)
            var checksum: UInt32 = 0
            var summed = 0
            while summed < payload {
                let count = min(zeros.count, payload - summed)
                checksum = zeros.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[..<count]), seed: checksum) }
                summed += count
            }
            let header = RecordFrame.paddingHeader(count: Int(frame), zeroChecksum: checksum, segment: segment, offset: offset)
            try header.withStorageBytes { (raw) throws(StorageError) in try write(raw, offset) }
            var done = 0
            while done < payload {
                let count = min(zeros.count, payload - done)
                try zeros.withStorageBytes { (raw) throws(StorageError) in
                    try write(UnsafeRawBufferPointer(rebasing: raw[..<count]), offset + headerSize + Int64(done))
                }
                done += count
            }
            offset += frame
        }
        return true
    }
}

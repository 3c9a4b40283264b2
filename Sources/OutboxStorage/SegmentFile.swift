import Glibc

/// One open segment file. The object owns the descriptor and closes it exactly once, in
/// `deinit`: a reader that took a reference keeps the file readable even while compaction
/// swaps in a newer generation.
final class SegmentFile: Sendable {
    let name: SegmentName
    let path: String
    let fd: Int32

    init(name: SegmentName, path: String, fd: Int32) {
        self.name = name
        self.path = path
        self.fd = fd
    }

    deinit {
        Glibc.close(fd)
    }

    /// Reads exactly `count` bytes at `offset`.
    func read(count: Int, at offset: UInt64) throws(StorageError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let got = bytes.withUnsafeMutableBytes { buffer in
            SegmentFile.readFully(fd, into: buffer, at: Int64(offset))
        }
        guard got >= 0 else { throw .io("read \(path): \(String(cString: strerror(errno)))") }
        guard got == count else { throw .corrupt("\(path): record at \(offset) runs past the end of the file") }
        return bytes
    }

    /// `pread` until `buffer` is full or end of file; the byte count, or -1 with `errno` set.
    static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int {
        var done = 0
        while done < buffer.count {
            let got = pread(fd, buffer.baseAddress.map { $0 + done }, buffer.count - done, off_t(offset) + off_t(done))
            if got > 0 {
                done += got
            } else if got == 0 {
                break
            } else if errno != EINTR {
                return -1
            }
        }
        return done
    }
}

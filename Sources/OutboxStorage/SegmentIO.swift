import Glibc

/// The two system calls of the append path, injectable so tests can simulate a full disk or
/// observe that completions run only after the sync. Each returns 0 or an `errno` value.
public struct SegmentIO: Sendable {
    /// Writes all of `bytes` at `offset` of `fd` (retrying short writes), or returns the errno.
    public var write: @Sendable (_ fd: Int32, _ bytes: UnsafeRawBufferPointer, _ offset: Int64) -> Int32
    /// Makes the written data durable (`fdatasync`), or returns the errno.
    public var sync: @Sendable (_ fd: Int32) -> Int32

    /// Seam with the given calls.
    public init(write: @escaping @Sendable (_ fd: Int32, _ bytes: UnsafeRawBufferPointer, _ offset: Int64) -> Int32,
                sync: @escaping @Sendable (_ fd: Int32) -> Int32) {
        self.write = write
        self.sync = sync
    }

    /// `pwrite` in a loop and `fdatasync`.
    public static let system = SegmentIO(
        write: { fd, bytes, offset in
            var done = 0
            while done < bytes.count {
                let written = pwrite(fd, bytes.baseAddress.map { $0 + done }, bytes.count - done, off_t(offset) + off_t(done))
                if written > 0 {
                    done += written
                } else if written < 0, errno == EINTR {
                    continue
                } else {
                    return written == 0 ? EIO : errno
                }
            }
            return 0
        },
        sync: { fd in
            while fdatasync(fd) != 0 {
                if errno != EINTR { return errno }
            }
            return 0
        })
}

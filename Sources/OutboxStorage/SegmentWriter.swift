import Glibc

/// A segment file written whole, front to back, beside whatever it replaces: `NAME.tmp` with
/// its header first, then what ``append(_:)`` and ``copy(from:range:)`` give it (gathered into
/// 1 MiB writes), then ``publish(replacing:)``: fsync → rename → fsync the directory → delete
/// the file it replaces → fsync the directory. A segment name therefore never refers to a file
/// that is not whole; a crash before the rename leaves a `.tmp` the next open deletes, one
/// between rename and delete leaves both generations, and the next open keeps the newer.
/// New segments, compaction's rewrites and recovery's repairs and migrations are all written so.
/// Dropped without `publish`, it deletes its `.tmp`. One thread at a time.
final class SegmentWriter {
    let name: SegmentName
    let path: String
    private let directory: String
    private let io: SegmentIO
    private let fd: Int32
    private var published = false
    private var pending: [UInt8] = []
    private var written: Int64 = 0

    private static let bufferSize = 1 << 20

    /// Bytes of the file so far: where the next append goes.
    var size: Int64 { written + Int64(pending.count) }

    init(_ name: SegmentName, in directory: String, io: SegmentIO) throws(StorageError) {
        self.name = name
        self.directory = directory
        self.io = io
        path = directory + "/" + name.fileName
        fd = Glibc.open(path + ".tmp", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw OperationLog.storageError(errno, "create \(path).tmp") }
        pending = SegmentHeader(segment: name.segment, generation: name.generation).encoded()
    }

    deinit {
        guard !published else { return }
        Glibc.close(fd)
        unlink(path + ".tmp")
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        if pending.count + bytes.count > Self.bufferSize { try flush() }
        if bytes.count >= Self.bufferSize {
            try write(bytes)
        } else {
            pending.append(contentsOf: bytes)
        }
    }

    /// Appends `range` of the file `source` as it is.
    func copy(from source: Int32, range: Range<Int64>) throws(StorageError) {
        guard !range.isEmpty else { return }
        var chunk = [UInt8](repeating: 0, count: Int(min(range.upperBound - range.lowerBound, Int64(Self.bufferSize))))
        var offset = range.lowerBound
        while offset < range.upperBound {
            let want = Int(min(Int64(chunk.count), range.upperBound - offset))
            let got = chunk.withUnsafeMutableBytes {
                SegmentFile.readFully(source, into: UnsafeMutableRawBufferPointer(rebasing: $0[..<want]), at: offset)
            }
            guard got == want else {
                throw got < 0 ? OperationLog.storageError(errno, "read for \(path)") : .io("read for \(path): the file shrank")
            }
            try chunk.withStorageBytes { (raw) throws(StorageError) in try append(UnsafeRawBufferPointer(rebasing: raw[..<want])) }
            offset += Int64(want)
        }
    }

    /// Makes the file the segment `name`, replacing the file at `old` if any, and returns it
    /// open for reading and appending. The writer is done with after this, even when it throws.
    func publish(replacing old: String?) throws(StorageError) -> SegmentFile {
        try flush()
        var failure = io.sync(fd)
        if failure == 0, rename(path + ".tmp", path) != 0 { failure = errno }
        guard failure == 0 else { throw OperationLog.storageError(failure, "create \(path)") }
        published = true
        let file = SegmentFile(name: name, path: path, fd: fd)
        try OperationLog.syncDirectory(directory)
        if let old {
            guard unlink(old) == 0 else { throw OperationLog.storageError(errno, "delete \(old)") }
            try OperationLog.syncDirectory(directory)
        }
        return file
    }

    private func flush() throws(StorageError) {
        guard !pending.isEmpty else { return }
        try pending.withStorageBytes { (raw) throws(StorageError) in try write(raw) }
        pending.removeAll(keepingCapacity: true)
    }

    /// Writes `bytes` at the end of what is written (the pending bytes are flushed first or are `bytes`).
    private func write(_ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        let failure = io.write(fd, bytes, written)
        guard failure == 0 else { throw OperationLog.storageError(failure, "write \(path).tmp") }
        written += Int64(bytes.count)
    }
}

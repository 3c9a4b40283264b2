import Glibc

/// Where recovery keeps the bytes it could not read as records, before it covers or cuts
/// them: `dataDirectory/damaged/` (mode 0700), one file per stretch (0600), named after the
/// segment file and the stretch's offset in it (`00000003.log-123456.bin`). Nothing there is
/// ever overwritten: a name that is taken (a crash before the segment was repaired, so the
/// same stretch is met again) gets the next free `.1.bin`, `.2.bin`, … Outbox never reads or
/// removes these files; they are for a human (or a tool) to inspect.
enum DamagedBytes {
    static let directoryName = "damaged"

    /// Copies `count` bytes at `offset` of `fd` (segment file `fileName` in `directory`) into a
    /// new file of `directory/damaged/`: written as `.tmp`, fsynced, linked to its name (which
    /// never replaces a file), the directory fsynced. Returns the file's path.
    static func keep(from fd: Int32, offset: Int64, count: Int64, of fileName: String,
                     in directory: String) throws(StorageError) -> String {
        let folder = directory + "/" + directoryName
        if mkdir(folder, 0o700) != 0, errno != EEXIST { throw OperationLog.storageError(errno, "create directory \(folder)") }
        // Whoever made the folder, its entry must be durable before a file in it counts as kept.
        try OperationLog.syncDirectory(directory)
        let base = folder + "/" + fileName + "-" + String(offset)
        let temporary = base + ".tmp"
        let out = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard out >= 0 else { throw OperationLog.storageError(errno, "create \(temporary)") }
        var failure = copy(from: fd, offset: offset, count: count, to: out)
        if failure == 0, fsync(out) != 0 { failure = errno }
        close(out)
        guard failure == 0 else {
            unlink(temporary)
            throw OperationLog.storageError(failure, "write \(temporary)")
        }
        defer { unlink(temporary) }
        for attempt in 0..<1000 {
            let path = attempt == 0 ? base + ".bin" : base + "." + String(attempt) + ".bin"
            if link(temporary, path) == 0 {
                try OperationLog.syncDirectory(folder)
                return path
            }
            guard errno == EEXIST else { throw OperationLog.storageError(errno, "link \(path)") }
        }
        throw .io("no free name for the damaged bytes of \(fileName) at \(offset) in \(folder)")
    }

    /// Copies in 1 MiB pieces; 0 or an errno value.
    private static func copy(from fd: Int32, offset: Int64, count: Int64, to out: Int32) -> Int32 {
        var chunk = [UInt8](repeating: 0, count: Int(min(count, 1 << 20)))
        var done: Int64 = 0
        while done < count {
            let want = Int(min(Int64(chunk.count), count - done))
            let got = chunk.withUnsafeMutableBytes {
                SegmentFile.readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[..<want]), at: offset + done)
            }
            if got < 0 { return errno }
            if got < want { return EIO }
            let failure = chunk.withUnsafeBytes { SegmentIO.system.write(out, UnsafeRawBufferPointer(rebasing: $0[..<want]), done) }
            if failure != 0 { return failure }
            done += Int64(want)
        }
        return 0
    }
}

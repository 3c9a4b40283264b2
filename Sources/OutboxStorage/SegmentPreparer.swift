import Dispatch
import Glibc
import OutboxTelemetry
import Synchronization

/// Writes the next segment out ahead of the log's writer: its header, then zeros up to the
/// segment size, synced, under a name recovery deletes (`00000002.log.prep`).
///
/// Appending into such a file changes neither its size nor its block map, so the `fdatasync`
/// after a batch writes the batch's blocks and nothing else. Appending to a growing file also
/// writes the inode (or commits the journal) at every sync, which on some disks costs as much
/// as the data (`Benchmarks/fsync-limit.c`: `over64` against `group64`). A zeroed tail is
/// already the format's end of data, so nothing else about the log changes.
///
/// It runs on a Dispatch queue of its own, never on the writer thread or the cooperative pool.
/// The writer takes a ready file at rotation and creates an ordinary one when none is ready,
/// so a slow or failed preparation (a full disk) costs speed, never a record.
final class SegmentPreparer: Sendable {
    static let suffix = ".prep"

    private enum State: Sendable {
        case idle
        case preparing(SegmentName)
        case ready(SegmentName, fd: Int32)
        case stopped
    }

    private let directory: String
    private let size: Int64
    private let logger: Logger
    private let state = Mutex(State.idle)
    private let queue = DispatchQueue(label: "outbox-log-prepare", qos: .utility)
    /// Zeros are written a megabyte at a time and synced every 8 MiB, so the device's queue
    /// never holds much of them ahead of a batch's sync.
    private static let chunk = 1 << 20
    private static let syncEvery: Int64 = 8 << 20

    init(directory: String, segmentBytes: Int, logger: Logger) {
        self.directory = directory
        self.size = Int64(segmentBytes)
        self.logger = logger
    }

    /// Starts writing `name` out, unless it is under way or ready; a ready file of another name
    /// (the writer rotated past it) is removed first. One preparation runs at a time.
    func prepare(_ name: SegmentName) {
        let (start, obsolete) = state.withLock { state -> (Bool, (SegmentName, Int32)?) in
            switch state {
            case .stopped, .preparing:
                return (false, nil)
            case .ready(let ready, let fd):
                guard ready != name else { return (false, nil) }
                state = .preparing(name)
                return (true, (ready, fd))
            case .idle:
                state = .preparing(name)
                return (true, nil)
            }
        }
        if let (ready, fd) = obsolete { discard(ready, fd) }
        if start { queue.async { [self] in write(name) } }
    }

    /// The prepared file for `name`, renamed to its segment name with the directory synced;
    /// nil when it is not ready (the caller then creates the segment itself).
    func take(_ name: SegmentName) throws(StorageError) -> SegmentFile? {
        let fd = state.withLock { state -> Int32? in
            guard case .ready(let ready, let fd) = state, ready == name else { return nil }
            state = .idle
            return fd
        }
        guard let fd else { return nil }
        let path = directory + "/" + name.fileName
        guard rename(path + Self.suffix, path) == 0 else {
            let error = OperationLog.storageError(errno, "rename \(path + Self.suffix)")
            discard(name, fd)
            throw error
        }
        let file = SegmentFile(name: name, path: path, fd: fd)
        try OperationLog.syncDirectory(directory)
        return file
    }

    /// Returns once no preparation is under way (tests: the next rotation then finds it ready).
    func settle() {
        queue.sync {}
    }

    /// Stops preparing: waits for a preparation under way and removes what was prepared.
    func stop() {
        let ready = state.withLock { state -> (SegmentName, Int32)? in
            defer { state = .stopped }
            if case .ready(let name, let fd) = state { return (name, fd) }
            return nil
        }
        if let (name, fd) = ready { discard(name, fd) }
        queue.sync {}
    }

    private func write(_ name: SegmentName) {
        let path = directory + "/" + name.fileName + Self.suffix
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return finish(name, nil, failure: errno) }
        let header = SegmentHeader(segment: name.segment, generation: name.generation).encoded()
        var failure = header.withUnsafeBytes { SegmentIO.system.write(fd, $0, 0) }
        let zeros = [UInt8](repeating: 0, count: Self.chunk)
        var offset = Int64(header.count)
        while failure == 0, offset < size {
            if case .stopped = state.withLock({ $0 }) { break }
            let count = Int(min(Int64(Self.chunk), size - offset))
            failure = zeros.withUnsafeBytes { SegmentIO.system.write(fd, UnsafeRawBufferPointer(rebasing: $0[..<count]), offset) }
            offset += Int64(count)
            if failure == 0, offset % Self.syncEvery == 0 || offset == size { failure = SegmentIO.system.sync(fd) }
        }
        finish(name, fd, failure: offset < size && failure == 0 ? ECANCELED : failure)
    }

    private func finish(_ name: SegmentName, _ fd: Int32?, failure: Int32) {
        let kept = state.withLock { state -> Bool in
            guard case .preparing(let preparing) = state, preparing == name else { return false }
            guard failure == 0, let fd else {
                state = .idle
                return false
            }
            state = .ready(name, fd: fd)
            return true
        }
        if kept {
            logger.debug("storage_segment_written_ahead", ["file": directory + "/" + name.fileName + Self.suffix, "bytes": String(size)])
            return
        }
        if failure != 0, failure != ECANCELED {
            logger.info("storage_prepare_failed", ["file": directory + "/" + name.fileName + Self.suffix,
                                                   "error": String(cString: strerror(failure))])
        }
        if let fd { discard(name, fd) }
    }

    private func discard(_ name: SegmentName, _ fd: Int32) {
        Glibc.close(fd)
        unlink(directory + "/" + name.fileName + Self.suffix)
    }
}

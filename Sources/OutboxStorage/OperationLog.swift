import Dispatch
import Foundation
import Glibc
import OutboxModel
import OutboxTelemetry
import Synchronization

/// The durable queue's storage engine: an append-only, segmented log of checksummed records
/// in the data directory (format in `docs/storage.md`), with group commit.
///
/// Appends are framed on the caller's thread, straight into a shared buffer; one writer
/// thread takes the whole buffer (the callers go on filling the other one), writes it with one
/// `pwrite`, makes it durable with one `fdatasync` and runs its completions. Batching needs no
/// timer: records pile up while the previous sync runs. Readers `pread` sealed and active
/// segments concurrently. The writer keeps zeros written ahead of its data
/// (``Options/zeroAheadBytes``), so that most syncs neither grow the file nor allocate blocks.
///
/// A record nobody waits for (the replayer's outcomes, written behind its lanes) may be
/// *deferred*: it does not start a sync by itself, but rides along with the next one that
/// something else starts, or waits until `maxDeferredRecords` pile up, until ``hurry()``, or
/// `maxDeferNanos` at most. A drain into a fast upstream otherwise syncs a few outcomes at a
/// time, back to back (3-4 records per `fdatasync` on loopback), and the syncs' kernel time was
/// an eighth of the drain's CPU.
///
/// The completions stay on the writer: handing them to a thread of their own lets the next
/// sync start sooner, but on two cores that thread waits for a CPU (a batch's completions
/// started about 200 µs after its sync) and the earlier syncs take fewer records each, so a
/// durable `202` cost 8-12 µs more CPU (52-58 against 44-45 µs) for no higher rate.
public final class OperationLog: Sendable {
    /// Tuning and test seams.
    public struct Options: Sendable {
        /// A segment is sealed and a new one started once it would grow past this size (a
        /// batch that started in a segment may overshoot it by up to one batch).
        public var segmentBytes: Int
        /// At most this many records share one write + `fdatasync`.
        public var maxBatchRecords: Int
        /// Compaction rewrites a sealed segment only when at most this fraction of its bytes
        /// is still needed (segments with nothing needed are always deleted).
        public var compactionLiveRatio: Double
        /// The write and sync calls of the append path (tests inject failures here).
        public var io: SegmentIO
        /// Where group commit counts its batches and their timing (`/admin/metrics`), if anywhere.
        package var counters: GroupCommitCounters?
        /// The longest a deferred record waits for a sync that something else starts.
        public var maxDeferNanos: UInt64
        /// This many deferred records start a sync by themselves.
        public var maxDeferredRecords: Int
        /// Zeros the writer keeps written past the active segment's data (never past
        /// `segmentBytes`), 0 for none. A sync that grows the file must also write its inode and
        /// allocate blocks; a sync into zeros already synced writes the data alone. So the batch
        /// that comes within half of this of the zeroed end writes the next stretch of zeros
        /// along with its data, under its own `fdatasync`: one sync in a few dozen pays that
        /// (at 30 KiB batches), the others ran about 40 % shorter on a virtio disk. The zeros
        /// are cut at seal and close; after a crash, recovery trims them quietly (a zeroed tail).
        public var zeroAheadBytes: Int
        /// A batch whose write + `fdatasync` takes this long or longer is logged
        /// (`storage_sync_slow`, warn): every `202` of the batch waited that long.
        public var slowSyncNanos: UInt64
        /// The monotonic clock (ns) the log times its batches and deferral deadlines by; nil in
        /// the initializer: `MonotonicClock`. Tests make a sync look slow without waiting.
        public var clock: @Sendable () -> UInt64

        /// Defaults: 64 MiB segments, batches of up to 1024 records, rewrite at ≤ 50 % live;
        /// deferred records wait 2 ms at most, or until 256 of them wait; 1 MiB zeroed ahead;
        /// syncs of 1 s or more logged.
        public init(segmentBytes: Int = 64 << 20, maxBatchRecords: Int = 1024,
                    compactionLiveRatio: Double = 0.5, io: SegmentIO = .system,
                    maxDeferNanos: UInt64 = 2_000_000, maxDeferredRecords: Int = 256,
                    zeroAheadBytes: Int = 1 << 20, slowSyncNanos: UInt64 = 1_000_000_000,
                    clock: (@Sendable () -> UInt64)? = nil) {
            self.segmentBytes = segmentBytes
            self.maxBatchRecords = max(1, maxBatchRecords)
            self.compactionLiveRatio = compactionLiveRatio
            self.io = io
            self.maxDeferNanos = maxDeferNanos
            self.maxDeferredRecords = max(1, maxDeferredRecords)
            self.zeroAheadBytes = max(0, zeroAheadBytes)
            self.slowSyncNanos = slowSyncNanos
            self.clock = clock ?? { MonotonicClock.nanos() }
        }
    }

    let directory: String
    let options: Options
    let logger: Logger
    private let appends = Mutex(AppendQueue())
    private let wakeWriter = DispatchSemaphore(value: 0)
    private let writerStopped = DispatchSemaphore(value: 0)
    /// Every segment readable now, by number; the writer adds to it, compaction swaps and removes.
    let segments: Mutex<SegmentTable>
    let diskByteCount: Atomic<Int>
    /// Two compactions at once would rewrite the same segment twice.
    let compactionLock = Mutex(())
    /// Bytes of each segment its owner no longer needs (``discard(_:)``): compaction reads only
    /// the segments where enough is dead, not the whole log every time.
    let deadBytes: Mutex<[UInt32: Int]>
    /// Records the recovery that opened the log found damaged and skipped (`storage_damaged`),
    /// over all segments: `/admin/status` shows it as `storage.damagedRecords`. A torn tail of
    /// the newest segment (a write the crash interrupted) is not damage and is not counted.
    public let damagedRecords: Int

    struct SegmentTable: Sendable {
        var files: [UInt32: SegmentFile]
        /// Segments below this number are sealed: only compaction changes them.
        var active: UInt32
        var isOpen = true
    }

    private struct PendingAppend: Sendable {
        var length: Int
        var completion: @Sendable (Result<RecordLocation, StorageError>) -> Void
    }

    /// What the writer thread is doing, as appenders need to know to wake it.
    private enum WriterWait: Sendable {
        /// Writing, syncing or completing: it looks at the queue again before it waits.
        case busy
        /// Nothing pending: any append wakes it.
        case idle
        /// Only deferred records pending: it sleeps until they are due.
        case deferring
    }

    private enum Lifecycle: Equatable {
        case open
        case closing
        case failed(String)
        case closed
    }

    private struct AppendQueue: Sendable {
        /// The frames of `pending`, back to back. The writer swaps the whole buffer for its
        /// empty one, so no copy happens on its thread and appends made during a sync go into
        /// the next batch at once.
        var bytes = FrameBuffer()
        var pending: [PendingAppend] = []
        /// When the oldest of `pending` was appended (monotonic ns).
        var oldestAppendedAt: UInt64 = 0
        /// Whether some record of `pending` is waited for (not deferred), or ``hurry()`` asked
        /// for the deferred ones: then the next sync starts at once.
        var due = false
        var writer = WriterWait.busy
        var state = Lifecycle.open
        var closeRequested = false
    }

    /// What only the writer thread touches: the active segment and where its data ends.
    struct WriterCursor: Sendable {
        var file: SegmentFile
        var end: Int64
        var nextSegment: UInt32
        /// Where the file ends: past `end`, zeros written ahead (``Options/zeroAheadBytes``).
        var zeroedEnd: Int64
        /// False once writing zeros failed in this segment (a full disk): it is not retried
        /// with every batch.
        var zeroing = true

        /// The file's size: `diskBytes` counts it, zeros included.
        var fileEnd: Int64 { max(end, zeroedEnd) }

        init(file: SegmentFile, end: Int64, nextSegment: UInt32) {
            self.file = file
            self.end = end
            self.nextSegment = nextSegment
            zeroedEnd = end
        }
    }

    init(directory: String, options: Options, logger: Logger, files: [UInt32: SegmentFile],
         cursor: WriterCursor, diskBytes: Int, damagedRecords: Int = 0, deadBytes: [UInt32: Int] = [:]) {
        self.directory = directory
        self.options = options
        self.logger = logger
        self.damagedRecords = damagedRecords
        self.deadBytes = Mutex(deadBytes)
        segments = Mutex(SegmentTable(files: files, active: cursor.file.name.segment))
        diskByteCount = Atomic(diskBytes)
        let thread = Thread { [self] in
            Self.nameForTheKernel("outbox-log-sync")
            self.runWriter(cursor)
        }
        thread.name = "outbox-log-writer"
        thread.start()
    }

    /// Names the calling thread for `top -H`, `pidstat -t` and `perf --sort comm` (Foundation's
    /// name is not the kernel's). Cosmetic: a failure changes nothing else.
    private static func nameForTheKernel(_ name: String) {
        let fd = Glibc.open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { Glibc.close(fd) }
        var text = name
        _ = text.withUTF8 { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    /// Group commit: the record is written by the writer thread together with every other
    /// record appended meanwhile, then ONE `fdatasync` covers the batch; `completion` runs (on
    /// the writer thread) only after that `fdatasync` returned, or with an
    /// error (disk full → `.full`; after `close()` → `.closed`, then on the caller's thread).
    /// A `deferred` record starts no sync by itself (see the type's comment).
    public func append(_ record: LogRecord, deferred: Bool = false,
                       completion: @escaping @Sendable (Result<RecordLocation, StorageError>) -> Void) {
        let size = RecordCodec.frameSize(record)
        guard size - RecordFrame.headerSize <= RecordFrame.maxLength else {
            completion(.failure(.io("record of \(size) bytes is larger than the log accepts")))
            return
        }
        let outcome: (wake: Bool, refused: StorageError?) = appends.withLock { queue in
            switch queue.state {
            case .open:
                // Encoded in place, under the lock: see `FrameBuffer`.
                let start = queue.bytes.count
                do throws(StorageError) {
                    try RecordCodec.encode(record, into: queue.bytes.extend(by: size))
                } catch {
                    // A spilled body could not be read back: its frame never joins a batch.
                    queue.bytes.removeLast(queue.bytes.count - start)
                    return (false, error)
                }
                if queue.pending.isEmpty { queue.oldestAppendedAt = options.clock() }
                queue.pending.append(PendingAppend(length: size, completion: completion))
                if !deferred || queue.pending.count >= options.maxDeferredRecords { queue.due = true }
                return (wakesWriter(&queue), nil)
            case .failed(let reason):
                return (false, .io(reason))
            case .closing, .closed:
                return (false, .closed)
            }
        }
        if let refused = outcome.refused {
            completion(.failure(refused))
        } else if outcome.wake {
            wakeWriter.signal()
        }
    }

    /// Whether the writer must be woken for what `queue` holds now; if so, it counts as woken.
    private func wakesWriter(_ queue: inout AppendQueue) -> Bool {
        switch queue.writer {
        case .busy: return false
        case .idle: break
        case .deferring: guard queue.due else { return false }
        }
        queue.writer = .busy
        return true
    }

    /// Starts the sync of the deferred records now rather than when they are due: someone
    /// (a lane whose unwritten outcomes pile up) is about to wait for them.
    public func hurry() {
        let wake = appends.withLock { queue -> Bool in
            guard !queue.pending.isEmpty, !queue.due else { return false }
            queue.due = true
            return wakesWriter(&queue)
        }
        if wake { wakeWriter.signal() }
    }

    /// `append(_:completion:)` for async callers: returns once the record is on stable storage.
    public func append(_ record: LogRecord) async throws(StorageError) -> RecordLocation {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<RecordLocation, StorageError>, Never>) in
            append(record) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Reads a `created` record back in full (headers + body).
    public func readRequest(at location: RecordLocation) throws(StorageError) -> OperationRequest {
        guard case .created(let request, _) = try readRecord(at: location) else {
            throw .corrupt("record at segment \(location.segment) offset \(location.offset) is not a created record")
        }
        return request
    }

    /// Reads the state stored in a `created` or `updated` record, response and conflict bodies included.
    public func readState(at location: RecordLocation) throws(StorageError) -> OperationState {
        switch try readRecord(at: location) {
        case .created(_, let state), .updated(_, let state):
            return state
        case .deleted:
            throw .corrupt("record at segment \(location.segment) offset \(location.offset) is a delete record")
        }
    }

    /// Reads and checks any record.
    public func readRecord(at location: RecordLocation) throws(StorageError) -> LogRecord {
        let file = try segmentFile(holding: location)
        let bytes = try file.read(count: Int(location.length), at: location.offset)
        let decoded: Result<LogRecord, StorageError> = bytes.withUnsafeBytes { raw in
            Result { () throws(StorageError) -> LogRecord in
                try RecordCodec.decodeFrame(raw, segment: location.segment, offset: location.offset)
            }
        }
        return try decoded.get()
    }

    /// The open file of the segment `location` points into, as long as the location is current.
    func segmentFile(holding location: RecordLocation) throws(StorageError) -> SegmentFile {
        let file: SegmentFile? = try segments.withLock { (table) throws(StorageError) -> SegmentFile? in
            guard table.isOpen else { throw .closed }
            return table.files[location.segment]
        }
        // Compaction removes a segment only when nothing in it is needed any more.
        guard let file else { throw .stale("no segment \(location.segment): it was compacted away") }
        guard file.name.generation == location.generation else {
            throw .stale("segment \(location.segment) was compacted: the location is stale")
        }
        return file
    }

    /// Tells compaction that the record at `location` is no longer needed: superseded by a
    /// later state, or its operation removed. An estimate compaction starts from; it still
    /// checks every record of a segment it reads against its caller's index.
    public func discard(_ location: RecordLocation) {
        deadBytes.withLock { $0[location.segment, default: 0] += Int(location.length) }
    }

    /// ``discard(_:)`` for many records at once: bytes by segment number.
    public func discard(bytesBySegment: [UInt32: Int]) {
        deadBytes.withLock { dead in
            for (segment, bytes) in bytesBySegment { dead[segment, default: 0] += bytes }
        }
    }

    /// Bytes of all segment files.
    public var diskBytes: Int { diskByteCount.load(ordering: .relaxed) }

    /// Flushes and syncs what is pending (completing those appends), stops the writer thread
    /// and closes the files (SIGTERM path). Later appends and reads fail with `.closed`.
    public func close() {
        let join = appends.withLock { queue -> Bool in
            guard !queue.closeRequested else { return false }
            queue.closeRequested = true
            if queue.state == .open { queue.state = .closing }
            return true
        }
        guard join else { return }
        wakeWriter.signal()
        writerStopped.wait()
        let files = segments.withLock { table in
            table.isOpen = false
            defer { table.files = [:] }
            return table.files
        }
        // The descriptors close when the last reader lets go of each file.
        _ = files
    }

    // MARK: writer thread

    private enum WriterStep {
        case write([PendingAppend], oldestAppendedAt: UInt64)
        /// Until woken, or until the monotonic deadline (ns) when there is one.
        case wait(until: UInt64?)
        case stop([PendingAppend], StorageError)
    }

    /// The most buffer memory a batch keeps for the next one: more than steady traffic of
    /// small records ever needs, far less than a few stored bodies of 10 MiB.
    private static let retainedBatchCapacity = 4 << 20

    private func runWriter(_ start: WriterCursor) {
        var cursor = start
        // The batch's bytes: swapped for the callers' buffer, which gets this one's capacity
        // back empty, so the two buffers take turns without a copy or an allocation.
        var batchBytes = FrameBuffer(capacity: 1 << 20)
        let zeros = [UInt8](repeating: 0, count: options.zeroAheadBytes)
        while true {
            let step = appends.withLock { queue -> WriterStep in
                switch queue.state {
                case .failed(let reason):
                    defer { queue.pending = []; queue.bytes.removeAll() }
                    return .stop(queue.pending, .io(reason))
                case .open, .closing, .closed:
                    break
                }
                if queue.pending.isEmpty {
                    if queue.state != .open {
                        queue.state = .closed
                        return .stop([], .closed)
                    }
                    queue.writer = .idle
                    return .wait(until: nil)
                }
                if !queue.due, queue.state == .open {
                    let deadline = queue.oldestAppendedAt &+ options.maxDeferNanos
                    if options.clock() < deadline {
                        queue.writer = .deferring
                        return .wait(until: deadline)
                    }
                }
                queue.writer = .busy
                let oldest = queue.oldestAppendedAt
                let batch = takeBatch(&queue, into: &batchBytes)
                return .write(batch, oldestAppendedAt: oldest)
            }
            switch step {
            case .wait(nil):
                wakeWriter.wait()
            case .wait(let deadline?):
                // A wake-up that comes late (after the deadline) leaves a signal behind: the
                // next wait then returns at once and the loop looks again, which is harmless.
                let now = options.clock()
                if deadline > now { _ = wakeWriter.wait(timeout: .now() + .nanoseconds(Int(deadline - now))) }
            case .write(let batch, let oldestAppendedAt):
                let started = options.clock()
                let outcome = commit(batchBytes, batch: batch, zeros: zeros, cursor: &cursor)
                let syncedAt = options.clock()
                options.counters?.synced(records: batch.count, wait: Int(started &- oldestAppendedAt),
                                         sync: Int(syncedAt &- started))
                if syncedAt &- started >= options.slowSyncNanos, case .success = outcome {
                    logger.warn("storage_sync_slow", ["file": cursor.file.path, "records": String(batch.count),
                                                      "ms": String((syncedAt &- started) / 1_000_000)])
                }
                batchBytes.removeAll()
                // A batch of large bodies grew the buffer: its memory goes back rather than
                // staying with the two buffers for good (they take turns, so both pass here).
                if batchBytes.capacity > Self.retainedBatchCapacity { batchBytes = FrameBuffer(capacity: 1 << 20) }
                WakeUpBatch.run { complete(batch, outcome) }
                options.counters?.completed(nanos: Int(options.clock() &- syncedAt))
            case .stop(let rejected, let error):
                cutZeros(&cursor)
                for append in rejected { append.completion(.failure(error)) }
                writerStopped.signal()
                return
            }
        }
    }

    /// Takes the oldest `maxBatchRecords` records out of `queue`, their frames into `bytes`
    /// (empty on entry): all of them almost always, by swapping the buffers.
    private func takeBatch(_ queue: inout AppendQueue, into bytes: inout FrameBuffer) -> [PendingAppend] {
        if queue.pending.count <= options.maxBatchRecords {
            let taken = queue.pending
            queue.pending = []
            queue.due = false
            queue.pending.reserveCapacity(taken.count)
            swap(&queue.bytes, &bytes)
            return taken
        }
        let taken = Array(queue.pending.prefix(options.maxBatchRecords))
        queue.pending.removeFirst(options.maxBatchRecords)
        let cut = taken.reduce(0) { $0 + $1.length }
        bytes.append(UnsafeRawBufferPointer(rebasing: queue.bytes.bytes[..<cut]))
        queue.bytes.removeFirst(cut)
        // The rest waited since then at most; close enough for a counter.
        queue.oldestAppendedAt = options.clock()
        return taken
    }

    /// Writes and syncs one batch at the end of the active segment (a new one when it would
    /// outgrow the segment size); returns where its first record went.
    private func commit(_ bytes: FrameBuffer, batch: [PendingAppend], zeros: [UInt8],
                        cursor: inout WriterCursor) -> Result<(segment: UInt32, generation: UInt32, start: Int64), StorageError> {
        let total = bytes.count
        let records = batch.count
        if cursor.end > Int64(SegmentHeader.size), cursor.end + Int64(total) > Int64(options.segmentBytes) {
            do throws(StorageError) {
                try rotate(&cursor)
            } catch {
                return .failure(error)
            }
        }
        let start = cursor.end
        // Only now is it known where the frames go: each header's check takes its place in.
        if let base = bytes.mutableBase {
            var offset = 0
            for append in batch {
                RecordFrame.place(base + offset, segment: cursor.file.name.segment, offset: start + Int64(offset))
                offset += append.length
            }
        }
        let fd = cursor.file.fd
        let sizeBefore = cursor.fileEnd
        defer { diskByteCount.add(Int(cursor.fileEnd - sizeBefore), ordering: .relaxed) }
        let writeError = options.io.write(fd, bytes.bytes, start)
        let dataEnd = start + Int64(total)
        if writeError == 0 { zeroAhead(from: dataEnd, zeros: zeros, cursor: &cursor) }
        if writeError != 0 {
            // Whatever part of the batch reached the file is cut off, so the next batch starts
            // at the last good record and recovery never sees a half-written one.
            _ = ftruncate(fd, off_t(start))
            cursor.zeroedEnd = start
            let error = storageError(writeError, "write \(cursor.file.path)")
            logger.error("storage_write_failed", ["file": cursor.file.path, "records": String(records), "error": "\(error)"])
            return .failure(error)
        }
        let syncError = options.io.sync(fd)
        if syncError != 0 {
            // After a failed fdatasync the kernel may have dropped the dirty pages ("fsyncgate"):
            // cut the batch off and sync again; if that fails too, nothing more can be promised.
            _ = ftruncate(fd, off_t(start))
            cursor.zeroedEnd = start
            let error = storageError(syncError, "fdatasync \(cursor.file.path)")
            logger.error("storage_sync_failed", ["file": cursor.file.path, "records": String(records), "error": "\(error)"])
            if options.io.sync(fd) != 0 {
                appends.withLock { $0.state = .failed("storage failed: \(error)") }
            }
            return .failure(error)
        }
        cursor.end = dataEnd
        return .success((cursor.file.name.segment, cursor.file.name.generation, start))
    }

    private func complete(_ batch: [PendingAppend], _ outcome: Result<(segment: UInt32, generation: UInt32, start: Int64), StorageError>) {
        switch outcome {
        case .success(let written):
            var offset = UInt64(written.start)
            for append in batch {
                let location = RecordLocation(segment: written.segment, generation: written.generation,
                                              offset: offset, length: UInt32(append.length))
                offset += UInt64(append.length)
                append.completion(.success(location))
            }
        case .failure(let error):
            for append in batch { append.completion(.failure(error)) }
        }
    }

    /// Writes the next stretch of zeros past `dataEnd` once the zeroed end is within half a
    /// stretch of it, for the coming sync to make durable with the data (see
    /// ``Options/zeroAheadBytes``). A failure (a full disk) only stops the zeroing in this
    /// segment: what was written of the zeros is cut, and the data goes on without them.
    private func zeroAhead(from dataEnd: Int64, zeros: [UInt8], cursor: inout WriterCursor) {
        // The file reaches at least the data just written, zeros or not.
        cursor.zeroedEnd = max(cursor.zeroedEnd, dataEnd)
        let stretch = Int64(zeros.count)
        let from = cursor.zeroedEnd
        let to = min(from + stretch, Int64(options.segmentBytes))
        guard cursor.zeroing, dataEnd + stretch / 2 > from, to > from else { return }
        let failure = zeros.withUnsafeBytes { options.io.write(cursor.file.fd, UnsafeRawBufferPointer(rebasing: $0[..<Int(to - from)]), from) }
        if failure == 0 {
            cursor.zeroedEnd = to
        } else {
            _ = ftruncate(cursor.file.fd, off_t(dataEnd))
            cursor.zeroedEnd = dataEnd
            cursor.zeroing = false
        }
    }

    /// Cuts the zeros written ahead off the active segment (at seal and close), so that a
    /// sealed segment ends with its last record. Not synced: should the cut be lost, recovery
    /// trims the zeros as a zeroed tail.
    private func cutZeros(_ cursor: inout WriterCursor) {
        guard cursor.zeroedEnd > cursor.end, ftruncate(cursor.file.fd, off_t(cursor.end)) == 0 else { return }
        diskByteCount.add(Int(cursor.end - cursor.zeroedEnd), ordering: .relaxed)
        cursor.zeroedEnd = cursor.end
    }

    /// Seals the active segment (already synced) and starts the next one.
    private func rotate(_ cursor: inout WriterCursor) throws(StorageError) {
        cutZeros(&cursor)
        let name = SegmentName(segment: cursor.nextSegment, generation: 0)
        let file = try OperationLog.createSegment(name, in: directory, io: options.io)
        segments.withLock { table in
            table.files[name.segment] = file
            table.active = name.segment
        }
        diskByteCount.add(SegmentHeader.size, ordering: .relaxed)
        cursor = WriterCursor(file: file, end: Int64(SegmentHeader.size), nextSegment: cursor.nextSegment + 1)
    }

    // MARK: files

    /// Creates a segment with its header (and `body` after it, already placed for its
    /// offsets) the crash-safe way (``SegmentWriter``), so a segment name never refers to a
    /// file without a whole header.
    static func createSegment(_ name: SegmentName, in directory: String, io: SegmentIO,
                              body: [UInt8] = []) throws(StorageError) -> SegmentFile {
        let writer = try SegmentWriter(name, in: directory, io: io)
        try body.withStorageBytes { (raw) throws(StorageError) in try writer.append(raw) }
        return try writer.publish(replacing: nil)
    }

    static func syncDirectory(_ directory: String) throws(StorageError) {
        let fd = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw storageError(errno, "open directory \(directory)") }
        defer { Glibc.close(fd) }
        guard fsync(fd) == 0 else { throw storageError(errno, "fsync directory \(directory)") }
    }

    static func storageError(_ code: Int32, _ what: String) -> StorageError {
        code == ENOSPC || code == EDQUOT ? .full : .io("\(what): \(String(cString: strerror(code)))")
    }

    private func storageError(_ code: Int32, _ what: String) -> StorageError {
        Self.storageError(code, what)
    }
}

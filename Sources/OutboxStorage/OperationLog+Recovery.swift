import Foundation
import Glibc
import OutboxModel
import OutboxTelemetry

extension OperationLog {
    /// Opens the log in `directory` (creating it 0700, segment files 0600) and recovers it:
    /// scans every segment, cuts a torn or corrupt tail (logging `storage_truncated` with file,
    /// offset and bytes cut via `logger`) and returns the live operations in creation order.
    /// Never crashes on bad bytes: it throws only when the directory or a file cannot be used.
    public static func open(directory: String, options: Options = .init(),
                            logger: Logger) throws(StorageError) -> (OperationLog, [RecoveredOperation]) {
        var builder = RecoveryBuilder()
        let log = try open(directory: directory, options: options, logger: logger) { builder.apply($0) }
        return (log, builder.finish())
    }

    /// One record met by recovery, in log order (bodies not decoded; states without response
    /// or conflict bodies).
    public enum RecoveryEvent: Sendable {
        /// First, before any record: about how many records the segments hold (their bytes
        /// over the size of the first record), so the caller can reserve room once instead of
        /// growing a million-entry table step by step. An estimate, never a limit.
        case expect(records: Int)
        case created(OperationSnapshot, RecordLocation)
        case updated(UUID, OperationState, RecordLocation)
        case deleted(UUID)
    }

    /// Opens and recovers like ``open(directory:options:logger:)``, but hands every record to
    /// `visit` as it is read instead of building a list: the caller's index is then the only
    /// copy of the operations in memory (what keeps a restart with a million queued
    /// operations small). Without `requestFields`, the snapshots of `created` events have an
    /// empty method, target and fingerprint: an index that never keeps them is built faster.
    ///
    /// Segments are read and decoded on Dispatch worker threads, a few segments ahead, while
    /// `visit` runs on the calling thread, always in log order: the events are exactly those
    /// of reading one segment after another.
    public static func open(directory: String, options: Options = .init(), logger: Logger, requestFields: Bool = true,
                            visit: (RecoveryEvent) -> Void) throws(StorageError) -> OperationLog {
        try open(directory: directory, options: options, logger: logger, requestFields: requestFields,
                 readers: recoveryReaders, prepare: { $0 }, visit: visit)
    }

    /// Like ``open(directory:options:logger:requestFields:visit:)``, with a step of the
    /// caller's own on the reading threads: `prepare` turns every event into what `visit`
    /// needs (parsed, hashed, slimmed), in parallel, so that the calling thread, which builds
    /// the index and is the one that makes a restart wait, does only what must be in order.
    /// `prepare` may run on any thread; `visit` sees the prepared events in log order.
    public static func open<Prepared: Sendable>(directory: String, options: Options = .init(), logger: Logger,
                                                requestFields: Bool = true,
                                                prepare: @escaping @Sendable (RecoveryEvent) -> Prepared,
                                                visit: (Prepared) -> Void) throws(StorageError) -> OperationLog {
        try open(directory: directory, options: options, logger: logger, requestFields: requestFields,
                 readers: recoveryReaders, prepare: prepare, visit: visit)
    }

    /// The leanest recovery: `prepare` gets every record as a `RecoveryRecord` (bytes, not
    /// strings; valid only during the call) on the reading threads and keeps what it needs;
    /// `visit` gets the results in log order on the calling thread. `reserve` is called first,
    /// with about how many records the segments hold (see ``RecoveryEvent/expect(records:)``).
    public static func open<Prepared: Sendable>(directory: String, options: Options = .init(), logger: Logger,
                                                reserve: (Int) -> Void,
                                                prepare: @escaping @Sendable (borrowing RecoveryRecord) -> Prepared,
                                                visit: (Prepared) -> Void) throws(StorageError) -> OperationLog {
        try open(directory: directory, options: options, logger: logger, readers: recoveryReaders,
                 reserve: reserve, prepare: prepare, visit: visit)
    }

    /// Threads that read segments during recovery: one per core, at least two (one can wait on
    /// the disk while the other decodes), at most four (the consumer, building the index on the
    /// calling thread, is the bottleneck well before that).
    static var recoveryReaders: Int { max(2, min(ProcessInfo.processInfo.activeProcessorCount, 4)) }

    /// Recovery with `readers` reading threads (1: one segment after another, as a reference).
    static func open<Prepared: Sendable>(directory: String, options: Options, logger: Logger, requestFields: Bool, readers: Int,
                                         prepare: @escaping @Sendable (RecoveryEvent) -> Prepared,
                                         visit: (Prepared) -> Void) throws(StorageError) -> OperationLog {
        // A `created` record without an origin (which `decodeRecord` never makes) is skipped.
        try open(directory: directory, options: options, logger: logger, readers: readers,
                 reserve: { visit(prepare(.expect(records: $0))) },
                 prepare: { record in recoveryEvent(record, requestFields: requestFields).map(prepare) },
                 visit: { prepared in if let prepared { visit(prepared) } })
    }

    /// Recovery of `RecoveryRecord`s with `readers` reading threads.
    static func open<Prepared: Sendable>(directory: String, options: Options, logger: Logger, readers: Int,
                                         reserve: (Int) -> Void,
                                         prepare: @escaping @Sendable (borrowing RecoveryRecord) -> Prepared,
                                         visit: (Prepared) -> Void) throws(StorageError) -> OperationLog {
        try makeDirectory(directory)
        let names = try segmentNames(in: directory, logger: logger)
        reserve(estimatedRecords(names, in: directory))
        var files: [UInt32: SegmentFile] = [:]
        var last: (file: SegmentFile, end: Int64)?
        var diskBytes = 0
        try SegmentPipeline<Prepared, (SegmentFile, Int64)?>.run(
            count: names.count, workers: readers,
            work: { (index, emit) throws(StorageError) in
                // Per segment: its first `created` record always carries its origin as changed,
                // so a consumer following `originChanged` is right at every segment boundary.
                var origins = OriginTable()
                return try recoverSegment(names[index], in: directory, logger: logger) { type, payload, location in
                    // A payload that does not parse is not swallowed: the segment's scan
                    // counts it and logs `storage_records_skipped` (it may not even hold an id).
                    let record: RecoveryRecord
                    do {
                        record = try RecordCodec.decodeRecord(type: type, payload: payload, location: location, origins: &origins)
                    } catch {
                        return false
                    }
                    emit(prepare(record))
                    return true
                }
            },
            consume: visit,
            finish: { segment in
                guard let (file, end) = segment else { return }
                files[file.name.segment] = file
                diskBytes += Int(end)
                last = (file, end)
            })
        let cursor: WriterCursor
        if let last {
            cursor = WriterCursor(file: last.file, end: last.end, nextSegment: last.file.name.segment + 1)
        } else {
            let file = try createSegment(SegmentName(segment: 1, generation: 0), in: directory, io: options.io)
            files[1] = file
            diskBytes += SegmentHeader.size
            cursor = WriterCursor(file: file, end: Int64(SegmentHeader.size), nextSegment: 2)
        }
        return OperationLog(directory: directory, options: options, logger: logger, files: files,
                            cursor: cursor, diskBytes: diskBytes)
    }

    /// The event of one record (states without response or conflict bodies); nil for a
    /// `created` record without an origin.
    private static func recoveryEvent(_ record: borrowing RecoveryRecord, requestFields: Bool) -> RecoveryEvent? {
        switch record.kind {
        case .created:
            guard let snapshot = record.snapshot(requestFields: requestFields) else { return nil }
            return .created(snapshot, record.location)
        case .updated:
            return .updated(record.id, record.state(), record.location)
        case .deleted:
            return .deleted(record.id)
        }
    }

    /// The segments' data bytes over the length of the first segment's first record: exact for
    /// a log of same-sized operations, and only a starting size otherwise (0 when unknown).
    private static func estimatedRecords(_ names: [SegmentName], in directory: String) -> Int {
        var dataBytes = 0
        var firstLength = 0
        for name in names {
            var info = stat()
            guard stat(directory + "/" + name.fileName, &info) == 0 else { continue }
            dataBytes += max(0, Int(info.st_size) - SegmentHeader.size)
            guard firstLength == 0 else { continue }
            let fd = Glibc.open(directory + "/" + name.fileName, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            var header = [UInt8](repeating: 0, count: RecordFrame.headerSize)
            let got = header.withUnsafeMutableBytes { SegmentFile.readFully(fd, into: $0, at: Int64(SegmentHeader.size)) }
            Glibc.close(fd)
            guard got == RecordFrame.headerSize else { continue }
            if case .frame(let length, _) = header.withUnsafeBytes({ RecordFrame.readHeader($0) }) {
                firstLength = RecordFrame.headerSize + length
            }
        }
        return firstLength > 0 ? dataBytes / firstLength : 0
    }

    /// Creates missing directories with mode 0700.
    private static func makeDirectory(_ path: String) throws(StorageError) {
        var built = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            built += "/" + component
            if mkdir(built, 0o700) != 0 && errno != EEXIST {
                throw storageError(errno, "create directory \(built)")
            }
        }
    }

    /// The segments to read, in order: one (the newest generation) per number. Leftovers of an
    /// interrupted segment creation (`.tmp`) or compaction (an older generation) are deleted.
    private static func segmentNames(in directory: String, logger: Logger) throws(StorageError) -> [SegmentName] {
        guard let dir = opendir(directory) else { throw storageError(errno, "open directory \(directory)") }
        var entries: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            entries.append(name)
        }
        closedir(dir)
        var newest: [UInt32: SegmentName] = [:]
        var stale: [String] = []
        for entry in entries {
            if entry.hasSuffix(".log.tmp"), SegmentName(fileName: String(entry.dropLast(4))) != nil {
                stale.append(entry)
                continue
            }
            guard let name = SegmentName(fileName: entry) else { continue }
            if let known = newest[name.segment] {
                stale.append(max(known, name) == name ? known.fileName : entry)
                newest[name.segment] = max(known, name)
            } else {
                newest[name.segment] = name
            }
        }
        for entry in stale {
            logger.info("storage_stale_file_removed", ["file": directory + "/" + entry])
            unlink(directory + "/" + entry)
        }
        if !stale.isEmpty { try syncDirectory(directory) }
        return newest.values.sorted()
    }

    /// Scans one segment, handing each record to `apply` (false: it did not parse), and cuts it after its last valid record. Returns the
    /// open file and where its data ends, or nil when the file is not a segment of ours (it is
    /// then renamed to `*.corrupt` and left for a human).
    private static func recoverSegment(_ name: SegmentName, in directory: String, logger: Logger,
                                       apply: (UInt8, UnsafeRawBufferPointer, RecordLocation) -> Bool) throws(StorageError) -> (SegmentFile, Int64)? {
        let path = directory + "/" + name.fileName
        let fd = Glibc.open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw storageError(errno, "open \(path)") }
        let file = SegmentFile(name: name, path: path, fd: fd)
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw storageError(errno, "stat \(path)") }
        let size = Int64(info.st_size)
        var headerBytes = [UInt8](repeating: 0, count: SegmentHeader.size)
        let got = headerBytes.withUnsafeMutableBytes { SegmentFile.readFully(fd, into: $0, at: 0) }
        guard got >= 0 else { throw storageError(errno, "read \(path)") }
        let header = got == SegmentHeader.size ? headerBytes.withUnsafeBytes { SegmentHeader(decoding: $0) } : nil
        guard let header, header.segment == name.segment, header.generation == name.generation else {
            logger.warn("storage_segment_ignored", ["file": path, "reason": "no valid segment header", "movedTo": path + ".corrupt"])
            rename(path, path + ".corrupt")
            try syncDirectory(directory)
            return nil
        }
        var scanner = SegmentScanner(fd: fd, path: path, fileSize: size, start: Int64(SegmentHeader.size))
        var malformed = 0
        let end = try scanner.scan(from: Int64(SegmentHeader.size)) { offset, frameLength, type, payload in
            let location = RecordLocation(segment: name.segment, generation: name.generation, offset: UInt64(offset), length: UInt32(frameLength))
            if !apply(type, payload, location) { malformed += 1 }
        }
        if malformed > 0 {
            logger.warn("storage_records_skipped", ["file": path, "records": String(malformed), "reason": "checksum valid but payload does not parse"])
        }
        if let damage = end.damage {
            guard ftruncate(fd, off_t(end.validEnd)) == 0, fsync(fd) == 0 else {
                throw storageError(errno, "truncate \(path)")
            }
            if end.zeroedTail {
                // What the writer had zeroed ahead of its data when the process stopped: no damage.
                logger.debug("storage_zeros_trimmed", ["file": path, "offset": String(end.validEnd),
                                                       "bytes": String(size - end.validEnd)])
            } else {
                logger.warn("storage_truncated", ["file": path, "offset": String(end.validEnd),
                                                  "bytes": String(size - end.validEnd), "reason": damage])
            }
        }
        return (file, end.validEnd)
    }
}

/// Replays recovery's events in log order into the list recovery returns: `created` adds an
/// operation, `updated` replaces its state, `deleted` removes it; events about unknown ids are
/// ignored (their operation was compacted away or never stored).
struct RecoveryBuilder {
    private var operations: [RecoveredOperation] = []
    private var removed: [Bool] = []
    private var slots: [UUID: Int] = [:]

    mutating func apply(_ event: OperationLog.RecoveryEvent) {
        switch event {
        case .expect:
            // A list grows as it is built; an estimate could only make it reserve too much.
            break
        case .created(let operation, let location):
            guard slots[operation.id] == nil else { return }
            slots[operation.id] = operations.count
            operations.append(RecoveredOperation(operation: operation, createdAt: location, stateAt: nil))
            removed.append(false)
        case .updated(let id, let state, let location):
            guard let slot = slots[id] else { return }
            operations[slot].operation.state = state
            operations[slot].stateAt = location
        case .deleted(let id):
            guard let slot = slots.removeValue(forKey: id) else { return }
            removed[slot] = true
        }
    }

    /// The live operations in creation order (compacted in place: no second copy of the list).
    mutating func finish() -> [RecoveredOperation] {
        var write = 0
        for read in operations.indices where !removed[read] {
            if read != write { operations.swapAt(read, write) }
            write += 1
        }
        operations.removeLast(operations.count - write)
        slots = [:]
        removed = []
        return operations
    }
}

import Foundation
import Glibc
import OutboxModel
import OutboxTelemetry

extension OperationLog {
    /// Opens the log in `directory` (creating it 0700, segment files 0600) and recovers it:
    /// scans every segment, cuts a torn tail (logging `storage_truncated` with file, offset and
    /// bytes cut via `logger`), keeps damaged bytes aside and every valid record after them
    /// (`storage_damaged`, ``damagedRecords``), migrates version 1 segments, and returns the
    /// live operations in creation order. Never crashes on bad bytes: it throws only when the
    /// directory or a file cannot be used.
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
        var damagedRecords = 0
        var deadBytes: [UInt32: Int] = [:]
        try SegmentPipeline<Prepared, RecoveredSegment?>.run(
            count: names.count, workers: readers,
            work: { (index, emit) throws(StorageError) in
                // Per segment: its first `created` record always carries its origin as changed,
                // so a consumer following `originChanged` is right at every segment boundary.
                var origins = OriginTable()
                return try recoverSegment(names[index], isNewest: index == names.count - 1, in: directory,
                                          io: options.io, logger: logger) { type, payload, location in
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
                guard let segment else { return }
                files[segment.file.name.segment] = segment.file
                diskBytes += Int(segment.end)
                damagedRecords += segment.damagedRecords
                if segment.paddingBytes > 0 { deadBytes[segment.file.name.segment] = segment.paddingBytes }
                last = (segment.file, segment.end)
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
                            cursor: cursor, diskBytes: diskBytes, damagedRecords: damagedRecords, deadBytes: deadBytes)
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
            var start = [UInt8](repeating: 0, count: SegmentHeader.size + RecordFrame.headerSize)
            let got = start.withUnsafeMutableBytes { SegmentFile.readFully(fd, into: $0, at: 0) }
            Glibc.close(fd)
            guard got == start.count else { continue }
            firstLength = start.withUnsafeBytes { raw in
                let frame = UnsafeRawBufferPointer(rebasing: raw[SegmentHeader.size...])
                if SegmentHeader(decoding: raw)?.version == SegmentHeader.legacyVersion {
                    return LegacyRecordFrame.readHeader(frame).map { LegacyRecordFrame.headerSize + $0.length } ?? 0
                }
                guard case .frame(_, let length, _) = RecordFrame.readHeader(frame, segment: name.segment, offset: Int64(SegmentHeader.size)) else { return 0 }
                return RecordFrame.headerSize + length
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

import Glibc
import OutboxTelemetry

extension OperationLog {
    /// What recovery made of one segment file.
    struct RecoveredSegment: Sendable {
        /// The segment as it is now (a new generation when it was rewritten or migrated).
        var file: SegmentFile
        /// Where its data ends: appends to the newest segment go there.
        var end: Int64
        /// Records found damaged and skipped (`storage_damaged`).
        var damagedRecords: Int
        /// Bytes of padding frames in it: no record needs them (compaction's dead bytes).
        var paddingBytes: Int
    }

    /// How a segment is brought back to a whole version 2 file.
    private enum Repair: Equatable {
        /// A version 2 segment with a good header: damaged stretches are covered with padding
        /// frames where they are, a tail is cut.
        case inPlace
        /// A version 2 segment with a bad header: written again as its next generation with a
        /// good header and padding over the damage, every record at the offset it had.
        case rewrite
        /// A version 1 segment (header good or not): every record framed anew into a version 2
        /// file of the next generation, as it is read.
        case migrate
    }

    /// Scans one segment, handing each record to `apply` (false: it did not parse) with its
    /// location in the segment as recovery leaves it, and repairs the file: damaged bytes are
    /// kept aside (``DamagedBytes``) and then covered, a torn tail is cut, a bad header or a
    /// version 1 segment is rewritten as the next generation (``SegmentWriter``). Returns nil
    /// when the file holds neither a valid header nor any record (it is then renamed
    /// `*.corrupt` and left for a human). `isNewest`: the highest segment, the only one where
    /// a torn tail (a write a crash interrupted) is expected; bad bytes at the end of an older
    /// one are damage like any other.
    static func recoverSegment(_ name: SegmentName, isNewest: Bool, in directory: String, io: SegmentIO, logger: Logger,
                               apply: (UInt8, UnsafeRawBufferPointer, RecordLocation) -> Bool) throws(StorageError) -> RecoveredSegment? {
        let path = directory + "/" + name.fileName
        let fd = Glibc.open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw storageError(errno, "open \(path)") }
        let file = SegmentFile(name: name, path: path, fd: fd)
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw storageError(errno, "stat \(path)") }
        let size = Int64(info.st_size)
        let header = try readHeader(file)
        // The name is what the log goes by: a header naming another segment is not this one's.
        let headerIsGood = header.map { $0.segment == name.segment && $0.generation == name.generation } ?? false
        let repair: Repair
        if let header, headerIsGood {
            repair = header.version == SegmentHeader.legacyVersion ? .migrate : .inPlace
        } else {
            repair = try legacyRecordFollowsHeader(file, size: size) ? .migrate : .rewrite
        }
        let framing: SegmentScanner.Framing = repair == .migrate ? .legacy : .current(segment: name.segment)
        let generation = repair == .inPlace ? name.generation : name.generation + 1
        let migrated = repair == .migrate ? try SegmentWriter(SegmentName(segment: name.segment, generation: generation),
                                                              in: directory, io: io) : nil

        var kept = 0
        var malformed = 0
        var paddingBytes = 0
        var frame: [UInt8] = []
        var migrationFailure: StorageError?
        var scanner = SegmentScanner(fd: fd, path: path, fileSize: size, start: Int64(SegmentHeader.size), framing: framing)
        let end = try scanner.scan(from: Int64(SegmentHeader.size)) { offset, frameLength, type, payload in
            if framing != .legacy, type == RecordFrame.RecordType.padding.rawValue {
                paddingBytes += frameLength
                return
            }
            var location = RecordLocation(segment: name.segment, generation: generation, offset: UInt64(offset), length: UInt32(frameLength))
            if let migrated {
                location.offset = UInt64(migrated.size)
                location.length = UInt32(RecordFrame.headerSize + payload.count)
                if migrationFailure == nil {
                    migrationFailure = reframe(type: type, payload: payload, at: location, into: &frame, writer: migrated)
                }
            }
            kept += 1
            if !apply(type, payload, location) { malformed += 1 }
        }
        if let migrationFailure { throw migrationFailure }
        if !headerIsGood, kept == 0, paddingBytes == 0 {
            logger.warn("storage_segment_ignored", ["file": path, "reason": "no valid segment header and no record", "movedTo": path + ".corrupt"])
            rename(path, path + ".corrupt")
            try syncDirectory(directory)
            return nil
        }
        if malformed > 0 {
            logger.warn("storage_records_skipped", ["file": path, "records": String(malformed), "reason": "checksum valid but payload does not parse"])
        }

        // Every damaged byte is kept aside (and synced) before the file is changed.
        var damaged = 0
        func report(_ stretch: SegmentScanner.Damage) throws(StorageError) {
            let saved = try DamagedBytes.keep(from: fd, offset: stretch.start, count: stretch.count, of: name.fileName, in: directory)
            damaged += stretch.skipped
            logger.warn("storage_damaged", ["file": path, "offset": String(stretch.start), "bytes": String(stretch.count),
                                            "skipped": String(stretch.skipped), "kept": String(kept), "reason": stretch.reason,
                                            "savedAs": saved])
        }
        if !headerIsGood {
            try report(.init(start: 0, end: min(size, Int64(SegmentHeader.size)), skipped: 0,
                             reason: header == nil ? "bad segment header" : "segment header of another file"))
        }
        for stretch in end.damages { try report(stretch) }
        if let tail = end.tail {
            if end.zeroedTail {
                // What the writer had zeroed ahead of its data when the process stopped: no damage.
                logger.debug("storage_zeros_trimmed", ["file": path, "offset": String(end.validEnd), "bytes": String(tail.count)])
            } else if isNewest {
                logger.warn("storage_truncated", ["file": path, "offset": String(end.validEnd), "bytes": String(tail.count),
                                                  "reason": tail.reason])
            } else {
                // A sealed segment was synced whole before the next one got a record: this is no torn write.
                try report(tail)
            }
        }

        switch repair {
        case .inPlace:
            var changed = false
            for stretch in end.damages {
                let covered = try PaddingFrame.cover(stretch.start..<stretch.end, segment: name.segment) { (bytes, offset) throws(StorageError) in
                    let failure = io.write(fd, bytes, offset)
                    guard failure == 0 else { throw storageError(failure, "write \(path)") }
                }
                if covered { paddingBytes += Int(stretch.count) }
                changed = changed || covered
            }
            if end.tail != nil {
                guard ftruncate(fd, off_t(end.validEnd)) == 0 else { throw storageError(errno, "truncate \(path)") }
                changed = true
            }
            if changed, fsync(fd) != 0 { throw storageError(errno, "fsync \(path)") }
            return RecoveredSegment(file: file, end: end.validEnd, damagedRecords: damaged, paddingBytes: paddingBytes)
        case .rewrite:
            let writer = try SegmentWriter(SegmentName(segment: name.segment, generation: generation), in: directory, io: io)
            var copied = Int64(SegmentHeader.size)
            for stretch in end.damages {
                try writer.copy(from: fd, range: copied..<stretch.start)
                let covered = try PaddingFrame.cover(stretch.start..<stretch.end, segment: name.segment) { (bytes, _) throws(StorageError) in
                    try writer.append(bytes)
                }
                if covered {
                    paddingBytes += Int(stretch.count)
                } else {
                    try writer.copy(from: fd, range: stretch.start..<stretch.end)
                }
                copied = stretch.end
            }
            try writer.copy(from: fd, range: copied..<max(copied, end.validEnd))
            let replacement = try writer.publish(replacing: path)
            logger.info("storage_segment_rewritten", ["file": replacement.path, "from": path, "records": String(kept),
                                                      "reason": "bad segment header"])
            return RecoveredSegment(file: replacement, end: end.validEnd, damagedRecords: damaged, paddingBytes: paddingBytes)
        case .migrate:
            guard let migrated else { throw .io("migration of \(path) lost its writer") }
            let migratedEnd = migrated.size
            let replacement = try migrated.publish(replacing: path)
            logger.info("storage_segment_migrated", ["file": replacement.path, "from": path, "records": String(kept),
                                                     "version": String(SegmentHeader.currentVersion)])
            return RecoveredSegment(file: replacement, end: migratedEnd, damagedRecords: damaged, paddingBytes: 0)
        }
    }

    /// Appends the version 2 frame of a version 1 record (placed at `location`) to `writer`,
    /// through `frame` (scratch, reused); the error, if the write failed.
    private static func reframe(type: UInt8, payload: UnsafeRawBufferPointer, at location: RecordLocation,
                                into frame: inout [UInt8], writer: SegmentWriter) -> StorageError? {
        let count = RecordFrame.headerSize + payload.count
        if frame.count < count { frame = [UInt8](repeating: 0, count: count) }
        return frame.withUnsafeMutableBytes { raw -> StorageError? in
            let bytes = UnsafeMutableRawBufferPointer(rebasing: raw[..<count])
            guard let base = bytes.baseAddress else { return .io("empty frame") }
            if let source = payload.baseAddress { (base + RecordFrame.headerSize).copyMemory(from: source, byteCount: payload.count) }
            RecordFrame.seal(bytes, type: type)
            RecordFrame.place(base, segment: location.segment, offset: Int64(location.offset))
            do throws(StorageError) {
                try writer.append(UnsafeRawBufferPointer(bytes))
                return nil
            } catch {
                return error
            }
        }
    }

    /// The header at the start of `file`; nil when it is too short or not a valid header.
    private static func readHeader(_ file: SegmentFile) throws(StorageError) -> SegmentHeader? {
        var bytes = [UInt8](repeating: 0, count: SegmentHeader.size)
        let got = bytes.withUnsafeMutableBytes { SegmentFile.readFully(file.fd, into: $0, at: 0) }
        guard got >= 0 else { throw storageError(errno, "read \(file.path)") }
        return got == SegmentHeader.size ? bytes.withUnsafeBytes { SegmentHeader(decoding: $0) } : nil
    }

    /// Whether, where a bad header ends, a version 1 record checks and a version 2 one does
    /// not: the file is then read as version 1 (a segment of the older format whose header
    /// was damaged), otherwise as version 2, which can skip damage to find its records.
    private static func legacyRecordFollowsHeader(_ file: SegmentFile, size: Int64) throws(StorageError) -> Bool {
        let start = Int64(SegmentHeader.size)
        guard size - start > Int64(LegacyRecordFrame.headerSize) else { return false }
        let head = try file.read(count: Int(min(Int64(RecordFrame.headerSize), size - start)), at: UInt64(start))
        let current = head.count == RecordFrame.headerSize ? head.withUnsafeBytes {
            RecordFrame.readHeader($0, segment: file.name.segment, offset: start)
        } : .invalid("short")
        if case .frame = current { return false }
        guard let (length, checksum) = head.withUnsafeBytes({ LegacyRecordFrame.readHeader($0) }),
              start + Int64(LegacyRecordFrame.headerSize + length) <= size else { return false }
        let body = try file.read(count: length, at: UInt64(start) + UInt64(LegacyRecordFrame.headerSize))
        return body.withUnsafeBytes { CRC32C.checksum($0) } == checksum
    }
}

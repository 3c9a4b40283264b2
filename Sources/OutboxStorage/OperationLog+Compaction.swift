import Foundation
import Glibc

extension OperationLog {
    /// Where an operation's records are after a compaction.
    public typealias CompactedLocations = (created: RecordLocation, state: RecordLocation?)

    /// Rewrites or removes sealed segments (never the active one), oldest first. `current(id)`
    /// answers the caller's index: the locations of an operation's `created` record and latest
    /// `updated` record, or nil when the operation is gone (deleted, expired, finished and no
    /// longer needed). A record is needed only when it is one of those locations; every other
    /// record (superseded states, deletes, records of gone operations) is dropped.
    ///
    /// Only segments whose discarded bytes (``discard(_:)``) leave at most
    /// `Options.compactionLiveRatio` of them needed are read: a log of a million pending
    /// operations, where nothing is dead, is not read at all (reading every segment every
    /// 30 s cost a tenth of a core and held the index's lock once per record). A segment read
    /// and found too live to rewrite keeps what was measured as its dead bytes.
    ///
    /// A sealed segment that needs nothing is deleted; one whose needed bytes are at most
    /// `Options.compactionLiveRatio` of it is rewritten with only those records, in their
    /// order, as its next generation: write new → fsync → rename → fsync dir → delete old →
    /// fsync dir. A crash between rename and delete leaves both; `open` keeps the newer.
    ///
    /// Returns the new locations of every operation that had a record moved. Apply an entry
    /// only while your index still points into the same segment number (a state appended
    /// during compaction lives in a newer segment and must win). Reads of a location from
    /// before the move fail with `.stale` instead of returning another record.
    public func compact(current: (UUID) -> CompactedLocations?) throws(StorageError) -> [UUID: CompactedLocations] {
        try compactionLock.withLock { (_: inout ()) throws(StorageError) -> [UUID: CompactedLocations] in
            let sealed = segments.withLock { table -> [SegmentFile] in
                guard table.isOpen else { return [] }
                return table.files.filter { $0.key < table.active }.map(\.value).sorted { $0.name < $1.name }
            }
            var moved: [UUID: CompactedLocations] = [:]
            for file in sealed {
                var info = stat()
                guard fstat(file.fd, &info) == 0 else { throw Self.storageError(errno, "stat \(file.path)") }
                let recordBytes = Int(info.st_size) - SegmentHeader.size
                let dead = deadBytes.withLock { $0[file.name.segment] ?? 0 }
                guard Double(max(0, recordBytes - dead)) <= Double(recordBytes) * options.compactionLiveRatio else { continue }
                try compactSegment(file, size: Int64(info.st_size), deadBefore: dead, current: current, moved: &moved)
            }
            return moved
        }
    }

    private struct ScannedRecord {
        var id: UUID
        var location: RecordLocation
        var isState: Bool
        var isDelete = false
    }

    /// Reads `file` (of `size` bytes, `deadBefore` of them reported dead) and removes or
    /// rewrites it; its dead bytes are then what was discarded while it was read, plus, when
    /// it stays as it was, what the read found unneeded.
    private func compactSegment(_ file: SegmentFile, size: Int64, deadBefore: Int, current: (UUID) -> CompactedLocations?,
                                moved: inout [UUID: CompactedLocations]) throws(StorageError) {
        var needed: [ScannedRecord] = []
        var neededBytes = 0
        var scanner = SegmentScanner(fd: file.fd, path: file.path, fileSize: size, start: Int64(SegmentHeader.size),
                                     framing: .current(segment: file.name.segment))
        let end = try scanner.scan(from: Int64(SegmentHeader.size)) { offset, frameLength, type, payload in
            // Padding covers damage recovery already kept aside: nothing needs it. A payload too
            // short for an id did not parse at recovery either (which logged it as skipped), so
            // no index needs it: dropping it loses nothing.
            guard type != RecordFrame.RecordType.padding.rawValue, let id = try? RecordCodec.decodeID(payload: payload) else { return }
            let location = RecordLocation(segment: file.name.segment, generation: file.name.generation,
                                          offset: UInt64(offset), length: UInt32(frameLength))
            if type == RecordFrame.RecordType.deleted.rawValue {
                // Every delete is kept: the `created` record it cancels may sit in an older
                // segment that this pass leaves as it is (mostly live), and without the delete
                // the next recovery would bring the operation back. A delete is ~30 bytes.
                needed.append(ScannedRecord(id: id, location: location, isState: false, isDelete: true))
                neededBytes += frameLength
                return
            }
            guard let now = current(id) else { return }
            let isState = type == RecordFrame.RecordType.updated.rawValue
            guard isState ? now.state == location : now.created == location else { return }
            needed.append(ScannedRecord(id: id, location: location, isState: isState))
            neededBytes += frameLength
        }
        let segment = file.name.segment
        guard end.damages.isEmpty, end.tail == nil else {
            // Damaged since it was recovered: rewriting it would destroy the damaged bytes (and
            // whatever record they held). It stays as it is until the next start keeps them
            // aside; it is not read again before more of it is discarded.
            deadBytes.withLock { $0[segment] = ($0[segment] ?? 0) - deadBefore }
            logger.warn("storage_compaction_skipped", ["file": file.path, "offset": String(end.damages.first?.start ?? end.validEnd),
                                                       "reason": "damaged records: kept as they are until the next start"])
            return
        }
        if needed.isEmpty {
            try retire(file, replacement: nil, size: Int(size))
            _ = deadBytes.withLock { $0.removeValue(forKey: segment) }
            logger.info("storage_segment_removed", ["file": file.path, "bytes": String(size)])
            return
        }
        let recordBytes = Int(size) - SegmentHeader.size
        guard Double(neededBytes) <= Double(recordBytes) * options.compactionLiveRatio else {
            deadBytes.withLock { $0[segment] = recordBytes - neededBytes + ($0[segment] ?? 0) - deadBefore }
            return
        }

        var body: [UInt8] = []
        body.reserveCapacity(neededBytes)
        let name = SegmentName(segment: file.name.segment, generation: file.name.generation + 1)
        var newLocations: [RecordLocation] = []
        for record in needed {
            let offset = SegmentHeader.size + body.count
            newLocations.append(RecordLocation(segment: name.segment, generation: name.generation,
                                               offset: UInt64(offset), length: record.location.length))
            var frame = try file.read(count: Int(record.location.length), at: record.location.offset)
            // The header's check is bound to the frame's offset, which changes.
            frame.withUnsafeMutableBytes { raw in
                if let base = raw.baseAddress {
                    RecordFrame.move(base, segment: segment, from: Int64(record.location.offset), to: Int64(offset))
                }
            }
            body.append(contentsOf: frame)
        }
        let replacement = try Self.createSegment(name, in: directory, io: options.io, body: body)
        try retire(file, replacement: replacement, size: Int(size))
        deadBytes.withLock { $0[segment] = ($0[segment] ?? 0) - deadBefore }
        for (record, location) in zip(needed, newLocations) where !record.isDelete {
            var entry = moved[record.id] ?? current(record.id) ?? (created: record.location, state: nil)
            if record.isState { entry.state = location } else { entry.created = location }
            moved[record.id] = entry
        }
        logger.info("storage_segment_compacted", ["file": replacement.path, "bytes": String(SegmentHeader.size + body.count),
                                                   "from": String(size), "records": String(needed.count)])
    }

    /// Swaps `replacement` in for `file` (or drops it), then deletes the old file and syncs
    /// the directory. Readers holding the old file keep reading it until they let go.
    private func retire(_ file: SegmentFile, replacement: SegmentFile?, size: Int) throws(StorageError) {
        segments.withLock { table in
            table.files[file.name.segment] = replacement
        }
        guard unlink(file.path) == 0 else { throw Self.storageError(errno, "delete \(file.path)") }
        try Self.syncDirectory(directory)
        diskByteCount.add((replacement.map { Self.fileSize($0) } ?? 0) - size, ordering: .relaxed)
    }

    private static func fileSize(_ file: SegmentFile) -> Int {
        var info = stat()
        return fstat(file.fd, &info) == 0 ? Int(info.st_size) : 0
    }
}

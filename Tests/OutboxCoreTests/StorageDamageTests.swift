import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxStorage
import Testing

/// Damage anywhere but the tail of the newest segment costs only the records it touches
/// (SPEC §6): over a log of small records in several small segments, every region of a
/// segment is damaged at every offset (the header, each field of a frame's header, the
/// payload, the last record of a sealed segment, the newest segment's tail) and 16 random
/// bytes at seeded random offsets. After recovery every record the damage did not touch is
/// there and readable, the damaged bytes are in `damaged/` (0600), `storage_damaged` names the
/// file, offset and counts, a second open is quiet, and appends after it survive a reopen.
@Suite struct StorageDamageTests {
    /// The log every case starts from: written once, restored into a fresh directory per case.
    struct Pristine {
        let written: [(request: OperationRequest, location: RecordLocation)]
        /// File name → bytes.
        let files: [String: [UInt8]]
        let options: OperationLog.Options

        var segments: [UInt32] { Set(written.map(\.location.segment)).sorted() }

        func fileName(_ segment: UInt32) -> String { SegmentName(segment: segment, generation: 0).fileName }

        /// Indices into `written` of the records of `segment`, in order.
        func records(in segment: UInt32) -> [Int] { written.indices.filter { written[$0].location.segment == segment } }

        /// Indices of the records whose frames share a byte with `range` of `segment`.
        func touched(_ range: Range<Int>, in segment: UInt32) -> Set<Int> {
            Set(records(in: segment).filter { index in
                let location = written[index].location
                return Int(location.offset) < range.upperBound && range.lowerBound < Int(location.offset) + Int(location.length)
            })
        }

        /// Writes the files into a new directory, `file` replaced by `damaged`.
        func restore(replacing file: String, with damaged: [UInt8]) throws -> StorageTestDirectory {
            let directory = try StorageTestDirectory()
            try FileManager.default.createDirectory(atPath: directory.logPath, withIntermediateDirectories: false,
                                                    attributes: [.posixPermissions: 0o700])
            for (name, bytes) in files { try directory.write(name == file ? damaged : bytes, to: directory.logPath + "/" + name) }
            return directory
        }
    }

    static func pristine() async throws -> Pristine {
        let directory = try StorageTestDirectory()
        let options = OperationLog.Options(segmentBytes: 2048)
        let (log, _) = try StorageSamples.open(directory, options: options)
        let written = try await StorageSamples.fill(log, count: 40, bodySize: 24).map { (request: $0.0, location: $0.1) }
        log.close()
        var files: [String: [UInt8]] = [:]
        for name in try directory.fileNames() { files[name] = try directory.bytes(of: directory.logPath + "/" + name) }
        let pristine = Pristine(written: written, files: files, options: options)
        #expect(pristine.segments.count >= 5, "the records fit in \(pristine.segments.count) segments")
        return pristine
    }

    /// What recovery must say about the damage of one case.
    enum Expected {
        /// A damaged stretch at `offset` of the file, `length` bytes, `skipped` records.
        case damage(offset: Int, length: Int, skipped: Int)
        /// A bad segment header: kept aside, the segment rewritten as generation 1.
        case header
        /// The newest segment's tail: cut, no damage.
        case tail
    }

    /// Recovers `pristine` with `file` replaced by `damaged` and checks everything the suite's
    /// comment promises. `lost`: indices of the records the damage destroyed.
    private static func expectRecovery(_ pristine: Pristine, file: String, damaged: [UInt8], lost: Set<Int>,
                                       _ expected: Expected, _ what: String,
                                       sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let directory = try pristine.restore(replacing: file, with: damaged)
        let path = directory.logPath + "/" + file
        let lines = StorageLogLines()
        let (log, recovered) = try StorageSamples.open(directory, options: pristine.options, lines: lines)
        let kept = pristine.written.indices.filter { !lost.contains($0) }.map { pristine.written[$0].request }
        #expect(recovered.map(\.operation.id) == kept.map(\.id), "\(what)\n\(lines.all)", sourceLocation: sourceLocation)
        for (operation, request) in zip(recovered, kept) where operation.operation.id == request.id {
            #expect(try log.readRequest(at: operation.createdAt) == request, "\(what)", sourceLocation: sourceLocation)
        }
        let damagedLines = lines.containing("storage_damaged")
        let aside = (try? FileManager.default.contentsOfDirectory(atPath: directory.logPath + "/damaged")) ?? []
        switch expected {
        case .damage(let offset, let length, let skipped):
            #expect(damagedLines.count == 1, "\(what)\n\(lines.all)", sourceLocation: sourceLocation)
            let line = damagedLines.first ?? ""
            #expect(line.contains(" warn storage_damaged file=\(path) offset=\(offset) bytes=\(length) skipped=\(skipped) kept=")
                    && line.contains("savedAs=" + directory.logPath + "/damaged/"), "\(what): \(line)", sourceLocation: sourceLocation)
            #expect(log.damagedRecords == skipped, "\(what)", sourceLocation: sourceLocation)
            #expect(lines.containing("storage_truncated").isEmpty, "\(what)\n\(lines.all)", sourceLocation: sourceLocation)
            #expect(aside == ["\(file)-\(offset).bin"], "\(what)", sourceLocation: sourceLocation)
            let saved = try directory.bytes(of: directory.logPath + "/damaged/\(file)-\(offset).bin")
            #expect(saved == Array(damaged[offset..<(offset + length)]), "\(what)", sourceLocation: sourceLocation)
        case .header:
            #expect(damagedLines.count == 1 && damagedLines.first?.contains("file=\(path) offset=0 bytes=32 skipped=0 ") == true,
                    "\(what)\n\(lines.all)", sourceLocation: sourceLocation)
            #expect(log.damagedRecords == 0, "\(what)", sourceLocation: sourceLocation)
            #expect(aside == ["\(file)-0.bin"], "\(what)", sourceLocation: sourceLocation)
            #expect(try directory.bytes(of: directory.logPath + "/damaged/\(file)-0.bin") == Array(damaged[..<32]),
                    "\(what)", sourceLocation: sourceLocation)
            let names = try directory.fileNames()
            #expect(!names.contains(file) && names.contains(file.replacingOccurrences(of: ".log", with: ".1.log")),
                    "\(what): \(names)", sourceLocation: sourceLocation)
        case .tail:
            #expect(damagedLines.isEmpty && lines.containing("storage_truncated").count == 1, "\(what)\n\(lines.all)",
                    sourceLocation: sourceLocation)
            #expect(log.damagedRecords == 0 && aside.isEmpty, "\(what)", sourceLocation: sourceLocation)
        }
        for name in aside {
            var info = stat()
            #expect(stat(directory.logPath + "/damaged/" + name, &info) == 0 && info.st_mode & 0o777 == 0o600, sourceLocation: sourceLocation)
        }
        try await expectQuietAfterwards(directory, pristine, kept: kept.map(\.id), log: log, what, sourceLocation: sourceLocation)
    }

    /// Appends to the recovered `log`, closes it, and opens the directory twice more: no
    /// damage or cut is reported again, and the appended record is kept.
    private static func expectQuietAfterwards(_ directory: StorageTestDirectory, _ pristine: Pristine, kept: [UUID],
                                              log: OperationLog, _ what: String, sourceLocation: SourceLocation) async throws {
        let extra = StorageSamples.request(1000, bodySize: 24)
        let extraAt = try await log.append(.created(extra, OperationState()))
        log.close()
        for _ in 0..<2 {
            let lines = StorageLogLines()
            let (again, recovered) = try StorageSamples.open(directory, options: pristine.options, lines: lines)
            defer { again.close() }
            #expect(recovered.map(\.operation.id) == kept + [extra.id], "\(what)", sourceLocation: sourceLocation)
            #expect(try again.readRequest(at: extraAt) == extra, "\(what)", sourceLocation: sourceLocation)
            #expect(again.damagedRecords == 0, "\(what)", sourceLocation: sourceLocation)
            let noisy = lines.all.filter { $0.contains(" warn ") || $0.contains("storage_segment") }
            #expect(noisy.isEmpty, "\(what): a second open reported \(noisy)", sourceLocation: sourceLocation)
        }
    }

    private static func flipped(_ bytes: [UInt8], at offset: Int) -> [UInt8] {
        var damaged = bytes
        damaged[offset] ^= 0xFF
        return damaged
    }

    /// Each byte of a frame's header (magic, type, length, payload checksum, header check) and
    /// every 16th byte of its payload, for records at the start, middle and end of a sealed
    /// segment and in the middle of the newest one: that record alone is lost, skipped as one.
    /// In the newest segment's last record the same damage is a torn tail, cut as before.
    @Test func aDamagedByteInAnyFieldOfAnyRecord_LosesThatRecordOnly() async throws {
        let pristine = try await Self.pristine()
        let sealed = pristine.records(in: pristine.segments[2])
        let newest = pristine.records(in: pristine.segments.last ?? 0)
        try #require(sealed.count >= 3 && newest.count >= 2, "segments too small: \(sealed.count), \(newest.count)")
        let targets = [sealed[0], sealed[sealed.count / 2], sealed[sealed.count - 1], newest[0], newest[newest.count - 1]]
        for target in targets {
            let location = pristine.written[target].location
            let file = pristine.fileName(location.segment)
            let bytes = try #require(pristine.files[file])
            let start = Int(location.offset)
            let length = Int(location.length)
            let isTail = target == newest.last
            let positions = Array(0..<RecordFrame.headerSize) + Array(stride(from: RecordFrame.headerSize, to: length, by: 16)) + [length - 1]
            for position in positions {
                let what = "record \(target) of segment \(location.segment), byte \(position) of its \(length)"
                try await Self.expectRecovery(pristine, file: file, damaged: Self.flipped(bytes, at: start + position), lost: [target],
                                              isTail ? .tail : .damage(offset: start, length: length, skipped: 1), what)
            }
        }
    }

    /// Every byte of the header of a sealed segment and of the newest one: no record is lost;
    /// the header's bytes are kept aside and the segment is rewritten with a good header.
    @Test func aDamagedByteInASegmentHeader_CostsNoRecord() async throws {
        let pristine = try await Self.pristine()
        for segment in [pristine.segments[1], pristine.segments.last ?? 0] {
            let file = pristine.fileName(segment)
            let bytes = try #require(pristine.files[file])
            for position in 0..<SegmentHeader.size {
                try await Self.expectRecovery(pristine, file: file, damaged: Self.flipped(bytes, at: position), lost: [],
                                              .header, "byte \(position) of the header of segment \(segment)")
            }
        }
    }

    /// 16 random bytes at random offsets of random segments (seeded): what is lost is at most
    /// the records they touch, and outside the newest segment's tail each lost record is
    /// counted in `damagedRecords`.
    @Test func sixteenRandomBytesAnywhere_LoseAtMostTheRecordsTheyTouch() async throws {
        let pristine = try await Self.pristine()
        var random = SeededRandom(seed: 27)
        let newest = pristine.segments.last ?? 0
        for trial in 0..<60 {
            let segment = pristine.segments.randomElement(using: &random) ?? 1
            let file = pristine.fileName(segment)
            let bytes = try #require(pristine.files[file])
            let position = Int.random(in: 0...(bytes.count - 16), using: &random)
            var damaged = bytes
            for index in position..<(position + 16) { damaged[index] = UInt8.random(in: 0...255, using: &random) }
            let touched = pristine.touched(position..<(position + 16), in: segment)
            let what = "trial \(trial): 16 bytes at \(position) of segment \(segment) (\(bytes.count) bytes), touching \(touched.sorted())"

            let directory = try pristine.restore(replacing: file, with: damaged)
            let lines = StorageLogLines()
            let (log, recovered) = try StorageSamples.open(directory, options: pristine.options, lines: lines)
            let ids = recovered.map(\.operation.id)
            let present = Set(ids)
            let missing = pristine.written.indices.filter { !present.contains(pristine.written[$0].request.id) }
            #expect(Set(missing).isSubset(of: touched), "\(what): lost \(missing)\n\(lines.all)")
            #expect(ids == pristine.written.map(\.request.id).filter { present.contains($0) }, "\(what): order")
            let inTail = segment == newest && touched.contains(pristine.records(in: newest).last ?? -1)
            if !inTail {
                #expect(log.damagedRecords == missing.count, "\(what)\n\(lines.all)")
                if !missing.isEmpty || position < SegmentHeader.size {
                    #expect(!lines.containing("storage_damaged").isEmpty, "\(what)\n\(lines.all)")
                }
            }
            try await Self.expectQuietAfterwards(directory, pristine, kept: ids, log: log, what, sourceLocation: #_sourceLocation)
        }
    }

    /// A damaged `updated` record: the operation keeps its state from before (it may be sent
    /// again: at-least-once); a damaged `deleted` record: the operation comes back; a damaged
    /// `created` record: that operation is lost (`docs/storage.md`).
    @Test func aDamagedUpdateOrDelete_FallsBackToTheStateBefore() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let kept = StorageSamples.request(1)
        let deleted = StorageSamples.request(2)
        let created = StorageSamples.request(3)
        let first = OperationState(status: .failed, retryCount: 1, lastAttemptAt: 5, nextAttemptAt: nil, lastError: "HTTP 503")
        let second = OperationState(status: .completed, retryCount: 2, lastAttemptAt: 9)
        _ = try await log.append(.created(kept, OperationState()))
        _ = try await log.append(.updated(kept.id, first))
        let updateAt = try await log.append(.updated(kept.id, second))
        _ = try await log.append(.created(deleted, OperationState()))
        let deleteAt = try await log.append(.deleted(deleted.id))
        let createAt = try await log.append(.created(created, OperationState()))
        let last = StorageSamples.request(4)
        _ = try await log.append(.created(last, OperationState()))
        log.close()
        let pristine = try directory.bytes(of: directory.segmentPath(1))

        let none = OperationState()
        let cases: [(RecordLocation, [(UUID, OperationState)])] = [
            (updateAt, [(kept.id, first), (created.id, none), (last.id, none)]),
            (deleteAt, [(kept.id, second), (deleted.id, none), (created.id, none), (last.id, none)]),
            (createAt, [(kept.id, second), (last.id, none)]),
        ]
        for (location, expected) in cases {
            try directory.write(Self.flipped(pristine, at: Int(location.offset) + Int(location.length) - 3), to: directory.segmentPath(1))
            let lines = StorageLogLines()
            let (reopened, recovered) = try StorageSamples.open(directory, lines: lines)
            reopened.close()
            #expect(recovered.map(\.operation.id) == expected.map(\.0), "damage at \(location.offset)\n\(lines.all)")
            #expect(recovered.map(\.operation.state) == expected.map(\.1), "damage at \(location.offset)")
            #expect(lines.containing("storage_damaged").count == 1, "\(lines.all)")
        }
    }

    /// A record of a log stored inside a body (a backup sent through Outbox, say) is never
    /// taken for a record of this log, even when the scan for the next frame runs across it:
    /// a frame's header check is bound to the segment and offset it was written at.
    @Test func aFrameInsideABody_IsNotTakenForARecord_WhenTheScanPassesIt() async throws {
        let other = try StorageTestDirectory()
        let (otherLog, _) = try StorageSamples.open(other)
        let stranger = StorageSamples.request(7)
        let strangerAt = try await otherLog.append(.created(stranger, OperationState()))
        otherLog.close()
        let strangerFrame = Array(try other.bytes(of: other.segmentPath(1))[Int(strangerAt.offset)...])

        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        var carrier = StorageSamples.request(1)
        carrier.body = strangerFrame
        let carrierAt = try await log.append(.created(carrier, OperationState()))
        let after = StorageSamples.request(2)
        _ = try await log.append(.created(after, OperationState()))
        log.close()
        try directory.write(Self.flipped(try directory.bytes(of: directory.segmentPath(1)), at: Int(carrierAt.offset) + 3),
                            to: directory.segmentPath(1))
        let lines = StorageLogLines()
        let (reopened, recovered) = try StorageSamples.open(directory, lines: lines)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == [after.id], "\(lines.all)")
        #expect(reopened.damagedRecords == 1)
    }

    /// Damage in a sealed segment that compaction reads since recovery (bit rot while
    /// running): compaction leaves the segment as it is rather than drop the damaged bytes,
    /// and the next start keeps them aside and every valid record.
    @Test func compaction_LeavesASegmentDamagedSinceRecoveryAsItIs() async throws {
        let directory = try StorageTestDirectory()
        let options = OperationLog.Options(segmentBytes: 2048, compactionLiveRatio: 1)
        let lines = StorageLogLines()
        let (log, _) = try StorageSamples.open(directory, options: options, lines: lines)
        let written = try await StorageSamples.fill(log, count: 20, bodySize: 24)
        let victim = written[1].1
        let path = directory.segmentPath(Int(victim.segment))
        let fd = Glibc.open(path, O_WRONLY)
        var byte: UInt8 = 0x5A
        #expect(pwrite(fd, &byte, 1, off_t(victim.offset) + 20) == 1)
        close(fd)
        let before = try directory.bytes(of: path)
        log.discard(bytesBySegment: [victim.segment: 10_000])
        let index = Dictionary(uniqueKeysWithValues: written.map { ($0.0.id, (created: $0.1, state: RecordLocation?.none)) })
        _ = try log.compact { index[$0] }
        #expect(try directory.bytes(of: path) == before)
        #expect(lines.containing("storage_compaction_skipped").count == 1, "\(lines.all)")
        log.close()
        let (reopened, recovered) = try StorageSamples.open(directory, options: options)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == written.filter { $0.1 != victim }.map(\.0.id))
    }
}

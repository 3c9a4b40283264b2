import Foundation
@testable import OutboxModel
@testable import OutboxStorage
import Testing

/// etcd-style damage tests: write → corrupt → reopen → every record the damage did not touch is
/// there (a torn tail of the newest segment is cut), new appends work, and a second reopen
/// agrees. `StorageDamageTests` goes over every region of a segment.
@Suite struct StorageRecoveryTests {
    /// Opens `directory`, checks it recovered exactly `expected` (ids in order), appends one
    /// more record, reopens and checks both again.
    private func expectRecovers(_ directory: StorageTestDirectory, expected: [UUID],
                                lines: StorageLogLines = StorageLogLines(),
                                sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let (log, recovered) = try StorageSamples.open(directory, lines: lines)
        #expect(recovered.map(\.operation.id) == expected, sourceLocation: sourceLocation)
        for operation in recovered {
            #expect(try log.readRequest(at: operation.createdAt).id == operation.operation.id, sourceLocation: sourceLocation)
        }
        let extra = StorageSamples.request(999)
        let extraAt = try await log.append(.created(extra, OperationState()))
        log.close()
        let (again, recoveredAgain) = try StorageSamples.open(directory)
        defer { again.close() }
        #expect(recoveredAgain.map(\.operation.id) == expected + [extra.id], sourceLocation: sourceLocation)
        #expect(try again.readRequest(at: extraAt) == extra, sourceLocation: sourceLocation)
    }

    @Test func truncatingTheLastRecordAtEveryByteOffset_KeepsAllEarlierRecords() async throws {
        let source = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(source)
        let written = try await StorageSamples.fill(log, count: 5, bodySize: 40)
        log.close()
        let original = try source.bytes(of: source.segmentPath(1))
        let last = try #require(written.last?.1)
        let earlier = written.dropLast().map(\.0.id)
        #expect(original.count == Int(last.offset) + Int(last.length))
        for cut in Int(last.offset)..<original.count {
            let directory = try StorageTestDirectory()
            try FileManager.default.createDirectory(atPath: directory.logPath, withIntermediateDirectories: false,
                                                    attributes: [.posixPermissions: 0o700])
            try directory.write(Array(original[0..<cut]), to: directory.segmentPath(1))
            let lines = StorageLogLines()
            try await expectRecovers(directory, expected: earlier, lines: lines)
            let truncated = lines.containing("storage_truncated")
            if cut == Int(last.offset) {
                #expect(truncated.isEmpty)
            } else {
                #expect(truncated.count == 1, "cut at \(cut)")
                #expect(truncated.first?.contains("offset=\(last.offset)") == true)
                #expect(truncated.first?.contains("bytes=\(cut - Int(last.offset))") == true)
            }
        }
    }

    @Test func aFlippedByteInTheMiddleRecord_LosesOnlyThatRecord() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let written = try await StorageSamples.fill(log, count: 5)
        log.close()
        let pristine = try directory.bytes(of: directory.segmentPath(1))
        let middle = written[2].1
        // In the length field, in the checksum, in the payload: each is caught.
        for position in [Int(middle.offset) + 2, Int(middle.offset) + 6, Int(middle.offset) + Int(middle.length) / 2] {
            var damaged = pristine
            damaged[position] ^= 0x5A
            try directory.write(damaged, to: directory.segmentPath(1))
            let lines = StorageLogLines()
            var expected = written.map(\.0.id)
            expected.remove(at: 2)
            try await expectRecovers(directory, expected: expected, lines: lines)
            #expect(lines.containing("storage_truncated").isEmpty, "\(lines.all)")
            #expect(lines.containing("storage_damaged").count == 1, "\(lines.all)")
        }
    }

    @Test func aZeroed4KiBBlock_LosesOnlyTheRecordsItTouches() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let written = try await StorageSamples.fill(log, count: 20, bodySize: 1024)
        log.close()
        var bytes = try directory.bytes(of: directory.segmentPath(1))
        let blockStart = 8192
        for index in blockStart..<(blockStart + 4096) { bytes[index] = 0 }
        try directory.write(bytes, to: directory.segmentPath(1))
        let intact = written.filter { Int($0.1.offset) + Int($0.1.length) <= blockStart || Int($0.1.offset) >= blockStart + 4096 }
        #expect(intact.count >= 10 && intact.count < 20)
        let lines = StorageLogLines()
        try await expectRecovers(directory, expected: intact.map(\.0.id), lines: lines)
        #expect(lines.containing("storage_truncated").isEmpty, "\(lines.all)")
        #expect(lines.containing("storage_damaged").count == 1, "\(lines.all)")
    }

    /// Zeros after the last record (what the writer zeroed ahead, or a filesystem that
    /// zero-fills after a crash) are a zeroed tail only when nothing but zeros follows, checked
    /// across several 1 MiB reads, and are trimmed quietly (a debug line); one non-zero byte at
    /// the very end makes it damage of another kind, logged as such. Either way every record is
    /// kept and the file is cut after the last one.
    @Test(arguments: [(1, false), (3 << 20, false), (3 << 20, true)])
    func zerosAfterTheLastRecord_AreCutAsAZeroedTailOnlyWhenNothingElseFollows(zeros: Int, endsInGarbage: Bool) async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let written = try await StorageSamples.fill(log, count: 3)
        log.close()
        let pristine = try directory.bytes(of: directory.segmentPath(1))
        var damaged = pristine + [UInt8](repeating: 0, count: zeros)
        if endsInGarbage { damaged[damaged.count - 1] = 0x5A }
        try directory.write(damaged, to: directory.segmentPath(1))
        let lines = StorageLogLines()
        let (reopened, recovered) = try StorageSamples.open(directory, lines: lines)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == written.map(\.0.id))
        let truncated = lines.containing("storage_truncated")
        let trimmed = lines.containing("storage_zeros_trimmed")
        if endsInGarbage {
            #expect(truncated.count == 1 && trimmed.isEmpty, "\(lines.all)")
            #expect(truncated.first?.contains("zero length record") == true, "\(truncated)")
        } else {
            #expect(truncated.isEmpty && trimmed.count == 1, "\(lines.all)")
            #expect(trimmed.first?.contains(" debug storage_zeros_trimmed ") == true, "\(trimmed)")
        }
        #expect(try directory.bytes(of: directory.segmentPath(1)) == pristine)
    }

    @Test func strayFilesInTheDirectory_AreIgnoredAndAFakeSegmentIsSetAside() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let written = try await StorageSamples.fill(log, count: 3)
        log.close()
        try directory.write(Array("not a log".utf8), to: directory.logPath + "/notes.txt")
        try directory.write((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 97) }, to: directory.segmentPath(7))
        try directory.write([1, 2, 3], to: directory.segmentPath(8))
        let lines = StorageLogLines()
        try await expectRecovers(directory, expected: written.map(\.0.id), lines: lines)
        #expect(lines.containing("storage_segment_ignored").count == 2)
        let names = try directory.fileNames()
        #expect(names.contains("notes.txt"))
        #expect(names.contains("00000007.log.corrupt"))
        #expect(names.contains("00000008.log.corrupt"))
    }

    @Test func damageInTheFirstOfTwoSegments_LosesOnlyTheDamagedRecord() async throws {
        let directory = try StorageTestDirectory()
        let options = OperationLog.Options(segmentBytes: 1200)
        let (log, _) = try StorageSamples.open(directory, options: options)
        let written = try await StorageSamples.fill(log, count: 12, bodySize: 100)
        log.close()
        let firstSegment = written.filter { $0.1.segment == 1 }
        #expect(firstSegment.count >= 3)
        #expect(written.contains { $0.1.segment == 2 })
        let damaged = firstSegment[1].1
        var bytes = try directory.bytes(of: directory.segmentPath(1))
        bytes[Int(damaged.offset) + 20] ^= 0xFF
        try directory.write(bytes, to: directory.segmentPath(1))
        let expected = written.filter { $0.1 != damaged }.map(\.0.id)
        let lines = StorageLogLines()
        let (reopened, recovered) = try StorageSamples.open(directory, options: options, lines: lines)
        #expect(recovered.map(\.operation.id) == expected)
        #expect(lines.containing("storage_damaged").first?.contains("00000001.log") == true, "\(lines.all)")
        let extra = try await reopened.append(.created(StorageSamples.request(77), OperationState()))
        #expect(extra.segment >= 2)
        reopened.close()
        let (again, recoveredAgain) = try StorageSamples.open(directory, options: options)
        again.close()
        #expect(recoveredAgain.count == expected.count + 1)
    }

    @Test func updatesAndDeletesForUnknownIds_AreIgnored() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let kept = StorageSamples.request(1)
        _ = try await log.append(.updated(UUID(), OperationState(status: .completed)))
        _ = try await log.append(.deleted(UUID()))
        _ = try await log.append(.created(kept, OperationState()))
        _ = try await log.append(.deleted(UUID()))
        log.close()
        try await expectRecovers(directory, expected: [kept.id])
    }

    @Test func aLeftoverTemporarySegment_IsRemovedAtOpen() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let written = try await StorageSamples.fill(log, count: 2)
        log.close()
        try directory.write([0, 1, 2], to: directory.segmentPath(2) + ".tmp")
        try await expectRecovers(directory, expected: written.map(\.0.id))
        #expect(try directory.fileNames() == ["00000001.log"])
    }
}

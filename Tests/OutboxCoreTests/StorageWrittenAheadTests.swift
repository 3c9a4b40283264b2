import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxStorage
import Testing

/// Segments written out ahead (header and zeros to the segment size, in the background, once
/// the active segment is half full): the writer rotates into them, seals the old segment
/// without its zeros, and a crash that leaves the zeros behind loses no record.
@Suite struct StorageWrittenAheadTests {
    static let segmentBytes = 64 << 10

    private func fileSize(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }

    /// Appends until the active segment is past half, lets the next one be written out ahead,
    /// then appends on until the log has rotated into it; does that until `segment` is active.
    private func rotate(into segment: UInt32, _ log: OperationLog, _ directory: StorageTestDirectory,
                        after written: [(OperationRequest, RecordLocation)] = []) async throws
        -> [(OperationRequest, RecordLocation)] {
        var written = written
        func append() async throws {
            let request = StorageSamples.request(written.count, bodySize: 1000)
            written.append((request, try await log.append(.created(request, OperationState()))))
        }
        var active = written.last?.1.segment ?? 1
        while active < segment {
            while written.last.map({ $0.1.segment == active && $0.1.offset < UInt64(Self.segmentBytes / 2) }) ?? true {
                try await append()
            }
            log.settleWritingAhead()
            let prepared = directory.segmentPath(Int(active) + 1) + ".prep"
            try #require(fileSize(prepared) == Self.segmentBytes, "no segment written out ahead at \(prepared)")
            while written.last?.1.segment == active { try await append() }
            active += 1
        }
        // A few more into the new segment.
        for _ in 0..<5 { try await append() }
        try #require(written.last?.1.segment == segment)
        return written
    }

    private func end(of segment: UInt32, _ written: [(OperationRequest, RecordLocation)]) throws -> Int {
        let last = try #require(written.last { $0.1.segment == segment }?.1)
        return Int(last.offset) + Int(last.length)
    }

    @Test func theLogRotatesIntoTheSegmentWrittenAhead_AndSealsTheOldOneWithoutZeros() async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        let (log, _) = try StorageSamples.open(directory, options: .init(segmentBytes: Self.segmentBytes), lines: lines)
        let written = try await rotate(into: 3, log, directory)

        #expect(lines.containing("storage_segment_written_ahead").count >= 2)
        #expect(!FileManager.default.fileExists(atPath: directory.segmentPath(3) + ".prep"))
        // The active segment keeps its zeros; the sealed ones end at their last record (segment
        // 2 was written out ahead too).
        #expect(fileSize(directory.segmentPath(3)) == Self.segmentBytes)
        #expect(fileSize(directory.segmentPath(2)) == (try end(of: 2, written)))
        #expect(fileSize(directory.segmentPath(1)) == (try end(of: 1, written)))
        for (request, location) in written {
            #expect(try log.readRequest(at: location) == request)
        }
        let onDisk = try directory.segmentFileNames().reduce(0) { $0 + (fileSize(directory.logPath + "/" + $1) ?? 0) }
        #expect(log.diskBytes == onDisk)

        log.close()
        // Closing cuts the active segment's zeros too, and leaves nothing written ahead behind.
        #expect(fileSize(directory.segmentPath(3)) == (try end(of: 3, written)))
        #expect(try directory.fileNames().allSatisfy { !$0.hasSuffix(".prep") })
    }

    /// The files as a `kill -9` leaves them (every acknowledged record synced, the active
    /// segment's zeros still there, the next segment half written out): a copy taken while the
    /// log is open. Recovery keeps every record, cuts the zeros without calling it damage and
    /// removes the half-prepared file.
    @Test func aCrashInsideASegmentWrittenAhead_LosesNoRecord_AndIsNotReportedAsDamage() async throws {
        let directory = try StorageTestDirectory()
        let options = OperationLog.Options(segmentBytes: Self.segmentBytes)
        let (log, _) = try StorageSamples.open(directory, options: options)
        let written = try await rotate(into: 2, log, directory)
        defer { log.close() }

        let crashed = try StorageTestDirectory()
        try FileManager.default.createDirectory(atPath: crashed.logPath, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        for name in try directory.segmentFileNames() {
            try crashed.write(try directory.bytes(of: directory.logPath + "/" + name), to: crashed.logPath + "/" + name)
        }
        #expect(fileSize(crashed.segmentPath(2)) == Self.segmentBytes)
        // A preparation the crash interrupted: a header and part of the zeros.
        let halfPrepared = crashed.segmentPath(3) + ".prep"
        try crashed.write(try directory.bytes(of: directory.segmentPath(2)).prefix(4096).map { $0 }, to: halfPrepared)

        let lines = StorageLogLines()
        let (reopened, recovered) = try StorageSamples.open(crashed, options: options, lines: lines)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == written.map(\.0.id))
        for (request, location) in written {
            #expect(try reopened.readRequest(at: location) == request)
        }
        #expect(lines.containing("storage_truncated").isEmpty, "\(lines.containing("storage_truncated"))")
        #expect(lines.containing("storage_zeros_trimmed").count == 1)
        #expect(!FileManager.default.fileExists(atPath: halfPrepared))
        let last = try #require(written.last?.1)
        #expect(fileSize(crashed.segmentPath(2)) == Int(last.offset) + Int(last.length))
        // Appends go on after the last record, not after the zeros.
        let later = StorageSamples.request(500)
        let laterAt = try await reopened.append(.created(later, OperationState()))
        #expect(laterAt.segment == 2 && laterAt.offset == last.offset + UInt64(last.length))
    }

    @Test func withWritingAheadOff_NoFileIsWrittenAhead() async throws {
        let directory = try StorageTestDirectory()
        let options = OperationLog.Options(segmentBytes: Self.segmentBytes, writeSegmentsAhead: false)
        let (log, _) = try StorageSamples.open(directory, options: options)
        let written = try await StorageSamples.fill(log, count: 80, bodySize: 1000)
        log.settleWritingAhead()
        #expect(try directory.fileNames().allSatisfy { !$0.hasSuffix(".prep") })
        let last = try #require(written.last?.1)
        #expect(fileSize(directory.segmentPath(Int(last.segment))) == Int(last.offset) + Int(last.length))
        log.close()
    }
}

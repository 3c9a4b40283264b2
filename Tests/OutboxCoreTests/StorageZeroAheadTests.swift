import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxStorage
import Testing

/// The writer keeps zeros written past the live segment's data (`zeroAheadBytes`), so that
/// most syncs write data into a file whose size and blocks are already on disk. Through real
/// files: what the file holds while the log is open, after `close`, after a crash, when the
/// zeros cannot be written, and at a segment's end.
@Suite("Storage: zeros written ahead of the data")
struct StorageZeroAheadTests {
    /// Every write the log makes: where, how long, and whether it was all zeros.
    final class RecordingIO: Sendable {
        struct Write: Equatable {
            var offset: Int64
            var count: Int
            var zeros: Bool
        }

        let writes = StorageShared<[Write]>([])
        /// Writes of zeros fail with this errno (0: they succeed).
        let failZeros = StorageShared<Int32>(0)

        var io: SegmentIO {
            SegmentIO(
                write: { [writes, failZeros] fd, bytes, offset in
                    let zeros = !bytes.isEmpty && !bytes.contains { $0 != 0 }
                    writes.withLock { $0.append(Write(offset: offset, count: bytes.count, zeros: zeros)) }
                    let failure = failZeros.value
                    if zeros, failure != 0 { return failure }
                    return SegmentIO.system.write(fd, bytes, offset)
                },
                sync: SegmentIO.system.sync)
        }

        func reset() { writes.withLock { $0 = [] } }
    }

    private static func end(of written: [(OperationRequest, RecordLocation)]) -> Int {
        written.last.map { Int($0.1.offset) + Int($0.1.length) } ?? SegmentHeader.size
    }

    @Test("the live segment holds zeros past its last record while open, and ends with it after close")
    func theLiveSegmentIsZeroedAheadAndCutAtClose() async throws {
        let directory = try StorageTestDirectory()
        let stretch = 64 << 10
        let (log, _) = try StorageSamples.open(directory, options: .init(zeroAheadBytes: stretch))
        let written = try await StorageSamples.fill(log, count: 5, bodySize: 300)
        let dataEnd = Self.end(of: written)
        let open = try directory.bytes(of: directory.segmentPath(1))
        // The first batch zeroed a whole stretch past its own end; the next four stayed inside its first half.
        let firstEnd = Int(written[0].1.offset) + Int(written[0].1.length)
        #expect(open.count == firstEnd + stretch)
        #expect(open[dataEnd...].allSatisfy { $0 == 0 })
        #expect(log.diskBytes == open.count, "diskBytes counts the zeros the file holds")
        for (request, location) in written { #expect(try log.readRequest(at: location) == request) }
        log.close()
        #expect(try directory.bytes(of: directory.segmentPath(1)) == Array(open[..<dataEnd]))
    }

    @Test("zeros are written only by the batch that comes within half a stretch of their end, each stretch where the last ended")
    func zerosAreWrittenWhenTheDataComesWithinHalfAStretch() async throws {
        let directory = try StorageTestDirectory()
        let recording = RecordingIO()
        let stretch = 8 << 10
        let (log, _) = try StorageSamples.open(directory, options: .init(io: recording.io, zeroAheadBytes: stretch))
        recording.reset()
        var zeroedEnd = Int64(SegmentHeader.size)
        for index in 0..<40 {
            let before = recording.writes.value.count
            let location = try await log.append(.created(StorageSamples.request(index, bodySize: 500), OperationState()))
            let dataEnd = Int64(location.offset) + Int64(location.length)
            let writes = Array(recording.writes.value[before...])
            #expect(writes.first == .init(offset: Int64(location.offset), count: Int(location.length), zeros: false))
            if dataEnd + Int64(stretch / 2) > zeroedEnd {
                let from = max(zeroedEnd, dataEnd)
                #expect(writes.dropFirst() == [.init(offset: from, count: stretch, zeros: true)], "record \(index) ends at \(dataEnd)")
                zeroedEnd = from + Int64(stretch)
            } else {
                #expect(writes.count == 1, "record \(index) ends at \(dataEnd), zeros up to \(zeroedEnd): \(writes)")
            }
        }
        #expect(zeroedEnd > Int64(3 * stretch), "the records never went past the first stretches")
        log.close()
    }

    @Test("after a crash the zeros are trimmed quietly, every record is kept, and appends go on after the last")
    func aCrashLeavesZerosThatRecoveryTrimsQuietly() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory, options: .init(zeroAheadBytes: 32 << 10))
        let written = try await StorageSamples.fill(log, count: 6)
        // The files as a kill -9 leaves them: everything synced, the zeros still there.
        let crashed = try StorageTestDirectory()
        try FileManager.default.createDirectory(atPath: crashed.logPath, withIntermediateDirectories: true)
        let segment = try directory.bytes(of: directory.segmentPath(1))
        log.close()
        #expect(segment.count > Self.end(of: written))
        try crashed.write(segment, to: crashed.segmentPath(1))

        let lines = StorageLogLines()
        let (reopened, recovered) = try StorageSamples.open(crashed, lines: lines)
        #expect(recovered.map(\.operation.id) == written.map(\.0.id))
        #expect(lines.containing("storage_truncated").isEmpty, "\(lines.all)")
        #expect(lines.containing("storage_zeros_trimmed").count == 1, "\(lines.all)")
        let later = StorageSamples.request(99)
        let next = try await reopened.append(.created(later, OperationState()))
        #expect(Int(next.offset) == Self.end(of: written))
        reopened.close()
        let (again, all) = try StorageSamples.open(crashed)
        defer { again.close() }
        #expect(all.map(\.operation.id) == written.map(\.0.id) + [later.id])
    }

    @Test("zeros that cannot be written (a full disk) cost nothing stored, and are not tried again in that segment")
    func zerosThatCannotBeWrittenAreGivenUp() async throws {
        let directory = try StorageTestDirectory()
        let recording = RecordingIO()
        recording.failZeros.withLock { $0 = ENOSPC }
        let (log, _) = try StorageSamples.open(directory, options: .init(io: recording.io, zeroAheadBytes: 16 << 10))
        recording.reset()
        let written = try await StorageSamples.fill(log, count: 10, bodySize: 2000)
        #expect(recording.writes.value.filter(\.zeros).count == 1)
        #expect(try directory.bytes(of: directory.segmentPath(1)).count == Self.end(of: written))
        log.close()
        let (reopened, recovered) = try StorageSamples.open(directory)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == written.map(\.0.id))
    }

    @Test("zeros stop at the segment size, and every sealed segment ends with its last record")
    func zerosStopAtTheSegmentSizeAndSealedSegmentsEndWithTheirData() async throws {
        let directory = try StorageTestDirectory()
        let segmentBytes = 24 << 10
        let (log, _) = try StorageSamples.open(directory, options: .init(segmentBytes: segmentBytes, zeroAheadBytes: 16 << 10))
        let written = try await StorageSamples.fill(log, count: 60, bodySize: 1000)
        let segments = Set(written.map(\.1.segment)).sorted()
        #expect(segments.count >= 3, "the records fit in \(segments.count) segments")
        for segment in segments {
            let bytes = try directory.bytes(of: directory.segmentPath(Int(segment)))
            let last = try #require(written.last { $0.1.segment == segment }?.1)
            let dataEnd = Int(last.offset) + Int(last.length)
            if segment == segments.last {
                #expect(bytes.count <= max(segmentBytes, dataEnd), "zeros past the segment size")
                #expect(bytes[dataEnd...].allSatisfy { $0 == 0 })
            } else {
                #expect(bytes.count == dataEnd, "sealed segment \(segment) holds \(bytes.count - dataEnd) bytes past its data")
            }
        }
        log.close()
        let (reopened, recovered) = try StorageSamples.open(directory)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == written.map(\.0.id))
    }
}

import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxStorage
import Synchronization
import Testing

/// Recovery reads segments on several threads: what the caller sees must be exactly what one
/// segment after another gives, damage and all.
@Suite struct StorageParallelRecoveryTests {
    /// A recovery event as comparable text (the enum itself is not `Equatable`).
    private static func describe(_ event: OperationLog.RecoveryEvent) -> String {
        switch event {
        case .expect(let records): "expect \(records)"
        case .created(let operation, let location): "created \(operation) at \(location)"
        case .updated(let id, let state, let location): "updated \(id) \(state) at \(location)"
        case .deleted(let id): "deleted \(id)"
        }
    }

    private static func recover(_ path: String, readers: Int, options: OperationLog.Options,
                                lines: StorageLogLines = StorageLogLines()) throws -> [String] {
        var events: [String] = []
        let log = try OperationLog.open(directory: path, options: options, logger: lines.logger, requestFields: false,
                                        readers: readers, prepare: { $0 }) { events.append(describe($0)) }
        log.close()
        return events
    }

    /// A log of many small segments holding creates, later states of some operations (in
    /// other segments than their creates) and deletes.
    private static func mixedLog(_ directory: StorageTestDirectory, options: OperationLog.Options) async throws -> [(OperationRequest, RecordLocation)] {
        let (log, _) = try StorageSamples.open(directory, options: options)
        var written: [(OperationRequest, RecordLocation)] = []
        for index in 0..<240 {
            var request = StorageSamples.request(index, bodySize: 40 + index % 7 * 30)
            if index % 11 == 0 { request.tag = "tag-\(index)" }
            if index % 13 == 0 { request.orderingKey = "lane-\(index % 3)" }
            written.append((request, try await log.append(.created(request, OperationState()))))
            if index >= 20, index % 3 == 0 {
                let earlier = written[index - 20].0.id
                let state = OperationState(status: index % 2 == 0 ? .completed : .pending, retryCount: index % 5,
                                           lastAttemptAt: Int64(index), nextAttemptAt: nil, lastError: "HTTP 503 #\(index)")
                _ = try await log.append(.updated(earlier, state))
            }
            if index >= 40, index % 5 == 0 { _ = try await log.append(.deleted(written[index - 40].0.id)) }
        }
        log.close()
        return written
    }

    private static func copyDirectory(_ from: String, to: String) throws {
        try FileManager.default.copyItem(atPath: from, toPath: to)
    }

    @Test func parallelReaders_GiveTheSameEventsAsOneSegmentAfterAnother_WithUpdatesDeletesAndDamage() async throws {
        let directory = try StorageTestDirectory()
        let options = OperationLog.Options(segmentBytes: 4 << 10)
        let written = try await Self.mixedLog(directory, options: options)
        let segments = Set(written.map(\.1.segment))
        #expect(segments.count > 10)
        // A flipped byte in a record of a middle segment: that record is lost, everything else is kept.
        let victim = written.first { $0.1.segment == UInt32(segments.count / 2) && $0.1.offset > UInt64(SegmentHeader.size) }
        let (damagedRequest, damaged) = try #require(victim)
        var bytes = try directory.bytes(of: directory.segmentPath(Int(damaged.segment)))
        bytes[Int(damaged.offset) + 12] ^= 0x40
        try directory.write(bytes, to: directory.segmentPath(Int(damaged.segment)))
        let serialCopy = directory.path + "/serial"
        try Self.copyDirectory(directory.logPath, to: serialCopy)

        let serialLines = StorageLogLines()
        let serial = try Self.recover(serialCopy, readers: 1, options: options, lines: serialLines)
        let parallelLines = StorageLogLines()
        let parallel = try Self.recover(directory.logPath, readers: 4, options: options, lines: parallelLines)

        #expect(serial.count > 240)
        #expect(parallel == serial)
        #expect(parallel.contains { $0.hasPrefix("updated") })
        #expect(parallel.contains { $0.hasPrefix("deleted") })
        #expect(!parallel.contains { $0.hasPrefix("created") && $0.contains(damagedRequest.id.uuidString) })
        #expect(parallel.filter { $0.hasPrefix("created") }.count == 239)
        // Both logged the damage once and covered it in place: the files keep their sizes.
        #expect(parallelLines.containing("storage_damaged").count == 1)
        #expect(serialLines.containing("storage_damaged").count == 1)
        let repaired = directory.segmentPath(Int(damaged.segment))
        #expect(try directory.bytes(of: repaired).count == bytes.count)
        #expect(try directory.bytes(of: serialCopy + "/" + (repaired as NSString).lastPathComponent).count == bytes.count)
    }

    @Test func aSegmentThatCannotBeOpened_FailsRecovery_WithoutHanging() async throws {
        let directory = try StorageTestDirectory()
        let options = OperationLog.Options(segmentBytes: 4 << 10)
        _ = try await Self.mixedLog(directory, options: options)
        // A directory where a segment file should be: open(O_RDWR) fails with EISDIR.
        let blocked = directory.segmentPath(3)
        try FileManager.default.removeItem(atPath: blocked)
        try FileManager.default.createDirectory(atPath: blocked, withIntermediateDirectories: false)
        #expect {
            _ = try Self.recover(directory.logPath, readers: 4, options: options)
        } throws: { error in
            guard case StorageError.io(let text) = error else { return false }
            return text.contains("00000003.log")
        }
    }

    @Test func thePipeline_HandsItemsOverInSegmentOrder_ThroughSmallChunks() throws {
        // Uneven segments (0 to 40 items), chunks of 3 with one waiting per segment: the
        // readers run ahead and wait, the consumer must still see 0, 1, 2, ... in order.
        let sizes = (0..<25).map { ($0 * 17) % 41 }
        var consumed: [Int] = []
        var finished: [Int] = []
        try SegmentPipeline<Int, Int>.run(count: sizes.count, workers: 4, chunkSize: 3, maxChunks: 1, work: { segment, emit in
            let base = sizes[..<segment].reduce(0, +)
            for item in 0..<sizes[segment] { emit(base + item) }
            return segment
        }, consume: { consumed.append($0) }, finish: { finished.append($0) })
        #expect(consumed == Array(0..<sizes.reduce(0, +)))
        #expect(finished == Array(0..<sizes.count))
    }

    @Test func thePipeline_StopsAtTheFirstFailingSegment_AfterEverythingBeforeIt() {
        let consumed = Mutex<[Int]>([])
        var finished: [Int] = []
        #expect(throws: StorageError.io("segment 6")) {
            try SegmentPipeline<Int, Int>.run(count: 12, workers: 3, chunkSize: 2, maxChunks: 1, work: { (segment, emit) throws(StorageError) in
                for item in 0..<5 { emit(segment * 10 + item) }
                if segment == 6 || segment == 9 { throw .io("segment \(segment)") }
                return segment
            }, consume: { item in consumed.withLock { $0.append(item) } }, finish: { finished.append($0) })
        }
        #expect(finished == Array(0..<6))
        let expected = (0..<7).flatMap { segment in (0..<5).map { segment * 10 + $0 } }
        #expect(consumed.withLock { $0 } == expected)
    }
}

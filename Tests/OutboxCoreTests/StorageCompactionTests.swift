import Foundation
@testable import OutboxModel
@testable import OutboxStorage
import Testing

@Suite struct StorageCompactionTests {
    /// A log with small segments: 24 operations with 300-byte bodies spread over several
    /// sealed segments; operations 3, 10 and 17 stay live (10 with a later state), every
    /// other one is deleted. Returns the log, the caller's index and the live requests.
    private func makeLog(_ directory: StorageTestDirectory) async throws
        -> (OperationLog, StorageShared<[UUID: OperationLog.CompactedLocations]>, [OperationRequest]) {
        let options = OperationLog.Options(segmentBytes: 2048, compactionLiveRatio: 0.9)
        let (log, _) = try StorageSamples.open(directory, options: options)
        let written = try await StorageSamples.fill(log, count: 24, bodySize: 300)
        let index = StorageShared<[UUID: OperationLog.CompactedLocations]>([:])
        for (request, location) in written { index.withLock { $0[request.id] = (location, nil) } }
        let liveIndices: Set<Int> = [3, 10, 17]
        let state = OperationState(status: .completed, retryCount: 1,
                                   response: StoredResponse(status: 200, headers: ["A": "b"], body: Array("done".utf8)))
        let stateAt = try await log.append(.updated(written[10].0.id, state))
        index.withLock { $0[written[10].0.id]?.state = stateAt }
        for (position, (request, location)) in written.enumerated() where !liveIndices.contains(position) {
            _ = try await log.append(.deleted(request.id))
            index.withLock { $0[request.id] = nil }
            log.discard(location)
        }
        return (log, index, liveIndices.sorted().map { written[$0].0 })
    }

    @Test func compactionKeepsLiveRecordsAndTheirData_AndDeletesDeadSegments() async throws {
        let directory = try StorageTestDirectory()
        let (log, index, live) = try await makeLog(directory)
        let filesBefore = try directory.fileNames()
        let bytesBefore = log.diskBytes
        let oldLocation = try #require(index.value[live[0].id]?.created)

        let moved = try log.compact { id in index.value[id] }
        for (id, locations) in moved { index.withLock { $0[id] = locations } }

        let filesAfter = try directory.fileNames()
        #expect(filesAfter.count < filesBefore.count)
        #expect(filesAfter.contains { $0.hasSuffix(".1.log") })
        #expect(log.diskBytes < bytesBefore)
        #expect(log.diskBytes == filesAfter.reduce(0) { total, name in
            total + ((try? directory.bytes(of: directory.logPath + "/" + name).count) ?? 0)
        })
        for request in live {
            let locations = try #require(index.value[request.id])
            #expect(try log.readRequest(at: locations.created) == request)
        }
        let tenth = try #require(index.value[live[1].id]?.state)
        #expect(try log.readState(at: tenth).response?.body == Array("done".utf8))
        // Operation 3's segment was rewritten: its old location is refused, not misread.
        #expect(moved[live[0].id]?.created.generation == 1)
        #expect(throws: StorageError.self) { try log.readRequest(at: oldLocation) }
        // Compacting again finds nothing more to do.
        #expect(try log.compact { id in index.value[id] }.isEmpty)
        log.close()

        let (reopened, recovered) = try StorageSamples.open(directory)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == live.map(\.id))
        for operation in recovered {
            #expect(operation.createdAt == index.value[operation.operation.id]?.created)
            #expect(operation.stateAt == index.value[operation.operation.id]?.state)
        }
        #expect(recovered[1].operation.state.status == .completed)
    }

    /// X is created in a segment that stays (its neighbours are live) and deleted in a later
    /// one that compaction rewrites: the delete must survive, or X comes back on reopen.
    @Test func aDeleteSurvivesCompaction_WhenItsCreatedRecordStaysInAnOlderSegment() async throws {
        let directory = try StorageTestDirectory()
        let options = OperationLog.Options(segmentBytes: 2048, compactionLiveRatio: 0.5)
        let (log, _) = try StorageSamples.open(directory, options: options)
        let early = try await StorageSamples.fill(log, count: 6, bodySize: 300)
        let index = StorageShared<[UUID: OperationLog.CompactedLocations]>([:])
        for (request, location) in early { index.withLock { $0[request.id] = (location, nil) } }
        let doomed = early[0].0.id
        // Dead filler after the early segment, then the delete of X among it.
        let filler = try await StorageSamples.fill(log, count: 12, bodySize: 300)
        _ = try await log.append(.deleted(doomed))
        index.withLock { $0[doomed] = nil }
        log.discard(early[0].1)
        for (request, location) in filler {
            _ = try await log.append(.deleted(request.id))
            log.discard(location)
        }
        _ = try await StorageSamples.fill(log, count: 6, bodySize: 300)  // seals the segments above

        let moved = try log.compact { id in index.value[id] }
        for (id, locations) in moved { index.withLock { $0[id] = locations } }
        log.close()

        let (reopened, recovered) = try StorageSamples.open(directory)
        defer { reopened.close() }
        let ids = Set(recovered.map(\.operation.id))
        #expect(!ids.contains(doomed), "a deleted operation came back after compaction")
        #expect(ids.isSuperset(of: early.dropFirst().map(\.0.id)))
    }

    @Test func aCrashBetweenRenameAndDelete_LeavesBothFiles_AndOpenKeepsTheNewer() async throws {
        let directory = try StorageTestDirectory()
        let (log, index, live) = try await makeLog(directory)
        let segmentOfFirst = try #require(index.value[live[0].id]?.created.segment)
        let oldPath = directory.segmentPath(Int(segmentOfFirst))
        let oldBytes = try directory.bytes(of: oldPath)
        let moved = try log.compact { id in index.value[id] }
        #expect(moved[live[0].id]?.created.generation == 1)
        log.close()
        // Put the old generation back, as if the process died before deleting it.
        try directory.write(oldBytes, to: oldPath)
        let lines = StorageLogLines()
        let (reopened, recovered) = try StorageSamples.open(directory, lines: lines)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == live.map(\.id))
        #expect(lines.containing("storage_stale_file_removed").count == 1)
        #expect(!FileManager.default.fileExists(atPath: oldPath))
        let first = try #require(recovered.first)
        #expect(try reopened.readRequest(at: first.createdAt) == live[0])
    }

    /// Compaction reads only what its owner said is dead: with nothing discarded it reads no
    /// segment (its index is never asked), even if the index would need none of the records.
    @Test func aSegmentWithNothingDiscardedIsNotRead() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory, options: OperationLog.Options(segmentBytes: 2048))
        let written = try await StorageSamples.fill(log, count: 12, bodySize: 300)
        let filesBefore = try directory.fileNames()
        #expect(filesBefore.count > 2, "the test needs sealed segments")
        let asked = StorageShared(0)

        #expect(try log.compact { _ in asked.withLock { $0 += 1 }; return nil }.isEmpty)
        #expect(asked.value == 0)
        #expect(try directory.fileNames() == filesBefore)

        // Once told, it reads that segment and removes it.
        let segment = written[0].1.segment
        let oneSegment = written.filter { $0.1.segment == segment }
        for (_, location) in oneSegment { log.discard(location) }
        _ = try log.compact { _ in asked.withLock { $0 += 1 }; return nil }
        #expect(asked.value == oneSegment.count)
        #expect(try directory.fileNames().count == filesBefore.count - 1)
        log.close()
    }

    /// A segment read and found too live to rewrite is not read again until more of it is
    /// discarded: what was measured stands.
    @Test func aSegmentFoundTooLiveIsNotReadAgainUntilMoreIsDiscarded() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory, options: OperationLog.Options(segmentBytes: 2048, compactionLiveRatio: 0.5))
        let written = try await StorageSamples.fill(log, count: 12, bodySize: 300)
        let segment = written[0].1.segment
        let first = written.filter { $0.1.segment == segment }
        #expect(first.count >= 3, "the test needs three records in the first segment")
        let index = StorageShared<[UUID: OperationLog.CompactedLocations]>([:])
        for (request, location) in written { index.withLock { $0[request.id] = (location, nil) } }
        // Told that all of it is dead while the index still needs two thirds.
        for (request, _) in first.prefix(first.count / 3) { index.withLock { $0[request.id] = nil } }
        for (_, location) in first { log.discard(location) }
        let asked = StorageShared(0)
        let lookup = { (id: UUID) -> OperationLog.CompactedLocations? in asked.withLock { $0 += 1 }; return index.value[id] }

        #expect(try log.compact(current: lookup).isEmpty)
        #expect(asked.value == first.count)
        #expect(try log.compact(current: lookup).isEmpty)
        #expect(asked.value == first.count, "a segment measured too live was read again")

        // More of it dies: now read again, and rewritten.
        for (request, location) in first.dropFirst(first.count / 3) {
            index.withLock { $0[request.id] = nil }
            log.discard(location)
        }
        _ = try log.compact(current: lookup)
        #expect(asked.value == 2 * first.count)
        #expect(!(try directory.fileNames()).contains { $0.hasPrefix(String(format: "%08d", segment)) })
        log.close()
    }

    @Test func theActiveSegmentIsNeverCompacted_AndAppendsContinueDuringCompaction() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let written = try await StorageSamples.fill(log, count: 3)
        for (request, _) in written { _ = try await log.append(.deleted(request.id)) }
        #expect(try log.compact { _ in nil }.isEmpty)
        #expect(try directory.fileNames() == ["00000001.log"])
        let extra = StorageSamples.request(5)
        let extraAt = try await log.append(.created(extra, OperationState()))
        #expect(try log.readRequest(at: extraAt) == extra)
        log.close()
    }
}

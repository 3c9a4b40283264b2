import Dispatch
import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxStorage
@testable import OutboxTelemetry
import Synchronization
import Testing

@Suite struct StorageGroupCommitTests {
    @Test func concurrentAppenders_AllCompleteExactlyOnce_AndAreAllThereAfterReopen() async throws {
        let directory = try StorageTestDirectory()
        let appenders = 64
        let perAppender = 40
        // The first sync after the first append is held until every appender has handed its
        // first record to the log, so those records are certainly waiting while a sync runs
        // (however the machine schedules the appenders): group commit must take them together.
        let firstRoundIssued = StorageShared(0)
        let firstRoundComplete = DispatchSemaphore(value: 0)
        let heldOnce = StorageShared(false)
        let syncs = StorageShared(0)
        let io = SegmentIO(write: SegmentIO.system.write, sync: { fd in
            let hold = firstRoundIssued.value > 0 && heldOnce.withLock { held in
                defer { held = true }
                return !held
            }
            // Bounded: if the appenders never all arrive, the batch assertion below says so.
            if hold { _ = firstRoundComplete.wait(timeout: .now() + 30) }
            syncs.withLock { $0 += 1 }
            return SegmentIO.system.sync(fd)
        })
        let options = OperationLog.Options(segmentBytes: 64 << 10, io: io)
        let (log, _) = try StorageSamples.open(directory, options: options)
        let completions = StorageShared<[UUID: Int]>([:])
        let locations = StorageShared<[UUID: RecordLocation]>([:])
        // Which sync (by count) a record's completion came after: records of one batch share it.
        let syncBefore = StorageShared<[UUID: Int]>([:])
        await withTaskGroup(of: Void.self) { group in
            for appender in 0..<appenders {
                group.addTask {
                    for index in 0..<perAppender {
                        let request = StorageSamples.request(appender * 1000 + index, bodySize: 256)
                        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                            log.append(.created(request, OperationState())) { result in
                                syncBefore.withLock { $0[request.id] = syncs.value }
                                completions.withLock { $0[request.id, default: 0] += 1 }
                                if case .success(let location) = result {
                                    locations.withLock { $0[request.id] = location }
                                }
                                done.resume()
                            }
                            if index == 0, firstRoundIssued.withLock({ $0 += 1; return $0 }) == appenders {
                                firstRoundComplete.signal()
                            }
                        }
                    }
                }
            }
        }
        log.close()
        let counts = completions.value
        #expect(counts.count == appenders * perAppender)
        #expect(counts.values.allSatisfy { $0 == 1 })
        let stored = locations.value
        #expect(stored.count == appenders * perAppender)
        #expect(Set(stored.values).count == stored.count)
        // Group commit: the first round's records were all waiting during one sync, so one
        // sync (the held one, or the next) covered at least half of them.
        let batchSizes = Dictionary(grouping: syncBefore.value.values, by: { $0 }).mapValues(\.count)
        let largest = batchSizes.values.max() ?? 0
        #expect(largest >= appenders / 2, "largest batch \(largest) records; \(syncs.value) syncs for \(appenders * perAppender) records")
        #expect(syncs.value < appenders * perAppender, "one sync per record: no batching at all")

        let (reopened, recovered) = try StorageSamples.open(directory, options: options)
        defer { reopened.close() }
        #expect(recovered.count == appenders * perAppender)
        #expect(Set(recovered.map(\.operation.id)) == Set(stored.keys))
        for operation in recovered {
            #expect(stored[operation.operation.id] == operation.createdAt)
        }
    }

    @Test func completionRunsOnlyAfterTheSyncReturned() async throws {
        let directory = try StorageTestDirectory()
        let syncEntered = DispatchSemaphore(value: 0)
        let releaseSync = DispatchSemaphore(value: 0)
        let holdSyncs = StorageShared(false)
        let state = StorageShared<(written: Int, synced: Int, completedBeforeSync: Int)>((0, 0, 0))
        let io = SegmentIO(
            write: { fd, bytes, offset in
                state.withLock { $0.written += 1 }
                return SegmentIO.system.write(fd, bytes, offset)
            },
            sync: { fd in
                if holdSyncs.value {
                    syncEntered.signal()
                    releaseSync.wait()
                }
                let result = SegmentIO.system.sync(fd)
                state.withLock { $0.synced = $0.written }
                return result
            })
        let (log, _) = try StorageSamples.open(directory, options: .init(io: io))
        holdSyncs.withLock { $0 = true }
        let completed = StorageShared(false)
        let done = DispatchSemaphore(value: 0)
        log.append(.created(StorageSamples.request(1), OperationState())) { result in
            state.withLock { if $0.synced < $0.written { $0.completedBeforeSync += 1 } }
            #expect((try? result.get()) != nil)
            completed.withLock { $0 = true }
            done.signal()
        }
        await Self.wait(syncEntered)
        // The writer is inside the sync: the record is written but not yet acknowledged.
        let completedDuringSync = completed.value
        #expect(!completedDuringSync)
        holdSyncs.withLock { $0 = false }
        releaseSync.signal()
        await Self.wait(done)
        let completedAfterSync = completed.value
        #expect(completedAfterSync)
        #expect(state.value.completedBeforeSync == 0)
        log.close()
    }

    /// Records appended while a sync runs go into the other buffer: the next sync takes them all
    /// with one write, and each of them completes only after that sync returned, in log order.
    @Test func recordsAppendedDuringASync_AreCoveredByTheNextSync_AndCompleteOnlyAfterIt() async throws {
        let directory = try StorageTestDirectory()
        let held = HeldSyncIO()
        let (log, _) = try StorageSamples.open(directory, options: .init(io: held.io, zeroAheadBytes: 0))
        held.holdNextSync()
        let syncsReturned = held.syncsReturned

        // Completion order, and for each record how many syncs had returned when it completed.
        let completed = StorageShared<[(id: UUID, syncsBefore: Int)]>([])
        let allDone = DispatchSemaphore(value: 0)
        let first = StorageSamples.request(0)
        let later = (1...3).map { StorageSamples.request($0) }
        for (index, request) in ([first] + later).enumerated() {
            // The first is being synced while the other three arrive.
            if index == 1 { await Self.wait(held.entered) }
            log.append(.created(request, OperationState())) { result in
                #expect((try? result.get()) != nil)
                completed.withLock { $0.append((request.id, syncsReturned.value)) }
                allDone.signal()
            }
        }
        // The first record's sync is still held: nothing may have completed.
        #expect(completed.value.isEmpty, "a record completed before the sync covering it returned")
        held.release.signal()
        for _ in 0..<4 { await Self.wait(allDone) }
        log.close()

        let order = completed.value
        #expect(order.map(\.id) == [first.id] + later.map(\.id), "completions ran out of log order")
        #expect(order.first?.syncsBefore == 1)
        for entry in order.dropFirst() {
            #expect(entry.syncsBefore == 2, "a record appended during the first sync completed before the second returned")
        }
        // One write for the first record, one for the three that came during its sync (no
        // zeros written ahead here: they are writes of their own, see `zerosWrittenAhead…`).
        let frameBytes = later.map { RecordCodec.frameSize(.created($0, OperationState())) }
        #expect(held.writes.value == [RecordCodec.frameSize(.created(first, OperationState())), frameBytes.reduce(0, +)])
        let (reopened, recovered) = try StorageSamples.open(directory)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == [first.id] + later.map(\.id))
    }

    /// More records waiting than `maxBatchRecords`: the oldest go first, the rest in the next
    /// batches, each record whole and in order.
    @Test func aBacklogLongerThanTheBatchLimit_IsWrittenInBatchesOfTheLimit_InOrder() async throws {
        let directory = try StorageTestDirectory()
        let held = HeldSyncIO()
        let (log, _) = try StorageSamples.open(directory, options: .init(maxBatchRecords: 2, io: held.io, zeroAheadBytes: 0))
        held.holdNextSync()
        let requests = (0..<6).map { StorageSamples.request($0, bodySize: 100 + $0 * 10) }
        let locations = StorageShared<[UUID: RecordLocation]>([:])
        let allDone = DispatchSemaphore(value: 0)
        for (index, request) in requests.enumerated() {
            // The first is being synced while the other five wait.
            if index == 1 { await Self.wait(held.entered) }
            log.append(.created(request, OperationState())) { result in
                if case .success(let location) = result { locations.withLock { $0[request.id] = location } }
                allDone.signal()
            }
        }
        held.release.signal()
        for _ in requests { await Self.wait(allDone) }
        let frames = requests.map { RecordCodec.frameSize(.created($0, OperationState())) }
        #expect(held.writes.value == [frames[0], frames[1] + frames[2], frames[3] + frames[4], frames[5]])
        for request in requests {
            let location = try #require(locations.value[request.id])
            #expect(try log.readRequest(at: location) == request)
        }
        log.close()
        let (reopened, recovered) = try StorageSamples.open(directory)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == requests.map(\.id))
    }

    @Test func close_ReturnsOnlyAfterEveryPendingCompletionRan() throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let completed = StorageShared(0)
        for index in 0..<200 {
            log.append(.created(StorageSamples.request(index), OperationState())) { result in
                if case .success = result { completed.withLock { $0 += 1 } }
            }
        }
        log.close()
        #expect(completed.value == 200)
    }

    /// Waits for a semaphore on a Dispatch thread so the test's executor is not blocked.
    private static func wait(_ semaphore: DispatchSemaphore) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                semaphore.wait()
                continuation.resume()
            }
        }
    }

    @Test func aFullDisk_FailsTheBatchWithFull_KeepsEverythingStored_AndLaterAppendsWork() async throws {
        let directory = try StorageTestDirectory()
        let diskFull = StorageShared(false)
        let io = SegmentIO(
            write: { fd, bytes, offset in
                guard diskFull.value else { return SegmentIO.system.write(fd, bytes, offset) }
                // Half the batch reaches the file before ENOSPC, as a real short write would.
                _ = SegmentIO.system.write(fd, UnsafeRawBufferPointer(rebasing: bytes[0..<(bytes.count / 2)]), offset)
                return ENOSPC
            },
            sync: SegmentIO.system.sync)
        let (log, _) = try StorageSamples.open(directory, options: .init(io: io))
        let before = try await StorageSamples.fill(log, count: 3)
        // Where the last good record ends (the zeros written ahead of it lie beyond).
        let dataEnd = try #require(before.last.map { Int($0.1.offset) + Int($0.1.length) })
        diskFull.withLock { $0 = true }
        await #expect(throws: StorageError.full) {
            try await log.append(.created(StorageSamples.request(50, bodySize: 2000), OperationState()))
        }
        #expect(try directory.bytes(of: directory.segmentPath(1)).count == dataEnd)
        diskFull.withLock { $0 = false }
        let after = StorageSamples.request(51)
        let afterAt = try await log.append(.created(after, OperationState()))
        #expect(afterAt.offset == UInt64(dataEnd))
        log.close()
        let (reopened, recovered) = try StorageSamples.open(directory)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == before.map(\.0.id) + [after.id])
    }

    @Test func aFailedSync_FailsTheBatch_AndTheLogCarriesOn() async throws {
        let directory = try StorageTestDirectory()
        let failNextSync = StorageShared(false)
        let io = SegmentIO(write: SegmentIO.system.write, sync: { fd in
            if failNextSync.withLock({ flag in defer { flag = false }; return flag }) { return EIO }
            return SegmentIO.system.sync(fd)
        })
        let (log, _) = try StorageSamples.open(directory, options: .init(io: io))
        let kept = try await StorageSamples.fill(log, count: 2)
        failNextSync.withLock { $0 = true }
        await #expect(throws: StorageError.self) {
            try await log.append(.created(StorageSamples.request(9), OperationState()))
        }
        let later = StorageSamples.request(10)
        _ = try await log.append(.created(later, OperationState()))
        log.close()
        let (reopened, recovered) = try StorageSamples.open(directory)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == kept.map(\.0.id) + [later.id])
    }

    @Test func afterClose_AppendsAndReadsFailWithClosed_AndCloseIsIdempotent() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let written = try await StorageSamples.fill(log, count: 1)
        log.close()
        log.close()
        await #expect(throws: StorageError.closed) {
            try await log.append(.deleted(UUID()))
        }
        #expect(throws: StorageError.closed) { try log.readRequest(at: written[0].1) }
    }

    @Test func segmentsRotateAtTheConfiguredSize_AndRecordsAreReadableInEverySegment() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory, options: .init(segmentBytes: 4096))
        let written = try await StorageSamples.fill(log, count: 30, bodySize: 500)
        #expect(Set(written.map(\.1.segment)).count >= 4)
        for (request, location) in written {
            #expect(try log.readRequest(at: location) == request)
        }
        let names = try directory.fileNames()
        #expect(names.first == "00000001.log")
        #expect(names.count == Set(written.map(\.1.segment)).count)
        #expect(log.diskBytes == names.reduce(0) { total, name in
            total + ((try? directory.bytes(of: directory.logPath + "/" + name).count) ?? 0)
        })
        log.close()
    }
}

/// Segment calls that record the bytes of every write and count the syncs that returned, and
/// hold the first sync after `holdNextSync()` until `release` is signalled (`entered` says it
/// is held): records appended meanwhile are known to wait for the next batch.
final class HeldSyncIO: Sendable {
    let writes = StorageShared<[Int]>([])
    let syncsReturned = StorageShared(0)
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    private let holdNext = StorageShared(false)

    var io: SegmentIO {
        SegmentIO(
            write: { [writes] fd, bytes, offset in
                writes.withLock { $0.append(bytes.count) }
                return SegmentIO.system.write(fd, bytes, offset)
            },
            sync: { [holdNext, entered, release, syncsReturned] fd in
                if holdNext.withLock({ hold in defer { hold = false }; return hold }) {
                    entered.signal()
                    release.wait()
                }
                let result = SegmentIO.system.sync(fd)
                syncsReturned.withLock { $0 += 1 }
                return result
            })
    }

    /// Counts from zero (opening a log writes and syncs a segment header) and holds the next sync.
    func holdNextSync() {
        writes.withLock { $0 = [] }
        syncsReturned.withLock { $0 = 0 }
        holdNext.withLock { $0 = true }
    }
}

/// A disk that stalls: the batch is logged (`storage_sync_slow`) and its duration counted in
/// `outbox_storage_sync_duration_seconds`; batches under the threshold are not logged.
@Suite struct StorageSlowSyncTests {
    @Test func aSyncOverTheThreshold_IsLoggedWithItsFileRecordsAndDuration_AndCountedInTheHistogram() async throws {
        let directory = try StorageTestDirectory()
        // The log's clock runs with the real one, and jumps 80 ms inside the stalled sync.
        let stallNextSync = StorageShared(false)
        let stalled = StorageShared<UInt64>(0)
        let io = SegmentIO(write: SegmentIO.system.write, sync: { fd in
            if stallNextSync.withLock({ flag in defer { flag = false }; return flag }) { stalled.withLock { $0 += 80_000_000 } }
            return SegmentIO.system.sync(fd)
        })
        let counters = GroupCommitCounters()
        var options = OperationLog.Options(io: io, slowSyncNanos: 50_000_000,
                                           clock: { MonotonicClock.nanos() + stalled.value })
        options.counters = counters
        let lines = StorageLogLines()
        let (log, _) = try StorageSamples.open(directory, options: options, lines: lines)
        _ = try await StorageSamples.fill(log, count: 2)
        stallNextSync.withLock { $0 = true }
        _ = try await log.append(.created(StorageSamples.request(9), OperationState()))
        log.close()

        let slow = lines.containing("storage_sync_slow")
        let millis = slow.map { line in Int(line.split(separator: " ").first { $0.hasPrefix("ms=") }?.dropFirst(3) ?? "") ?? -1 }
        #expect(slow.contains { $0.contains("warn") && $0.contains("records=1") && $0.contains(directory.segmentPath(1)) }, "\(lines.all)")
        // The stalled batch is there; any other line is a sync this machine made slow by itself.
        #expect(millis.contains { $0 >= 80 }, "\(slow)")
        #expect(millis.allSatisfy { $0 >= 50 }, "only syncs of 50 ms or more are logged: \(slow)")

        let samples = Dictionary(uniqueKeysWithValues: Histogram.samples([counters.syncDurations], number: { String($0) }))
        #expect(samples["_count"] == String(counters.batches), "\(samples)")
        #expect(Int(samples["_bucket{le=\"0.05\"}"] ?? "") ?? .max < counters.batches, "the stalled sync is above 50 ms: \(samples)")
        #expect(Double(samples["_sum"] ?? "") ?? 0 >= 0.08, "\(samples)")
    }

    @Test func histogramBuckets_AreInclusiveUpperBounds_AndCumulative() {
        let histogram = Histogram(bounds: [0.0001, 0.001])
        for micros in [0, 100, 101, 1000, 1001, 5_000_000] { histogram.observe(micros: micros) }
        let samples = Histogram.samples([histogram, histogram], number: { String($0) })
        #expect(samples.map(\.0) == ["_bucket{le=\"0.0001\"}", "_bucket{le=\"0.001\"}", "_bucket{le=\"+Inf\"}", "_sum", "_count"])
        #expect(samples.map(\.1) == ["4", "8", "12", String(2 * 5.002202), "12"])
    }
}

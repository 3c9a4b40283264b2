import Dispatch
import Foundation
@testable import OutboxModel
@testable import OutboxStorage
import Synchronization
import Testing

/// Deferred records (the replayer's outcomes, which nobody waits for) start no sync by
/// themselves: they ride along with a sync something else starts, or go once enough of them
/// wait, once someone hurries them, at close, or once their time is up.
@Suite struct StorageDeferredWriteTests {
    /// An hour: in these tests the time limit never fires, so whatever syncs them is the event
    /// the test names.
    static let never: UInt64 = 3_600_000_000_000

    /// Counts syncs, on real files.
    final class CountingIO: Sendable {
        let syncs = StorageShared(0)
        var io: SegmentIO {
            SegmentIO(write: SegmentIO.system.write, sync: { [syncs] fd in
                syncs.withLock { $0 += 1 }
                return SegmentIO.system.sync(fd)
            })
        }
    }

    /// Appends `count` deferred records; `done` is signalled once per completion.
    static func appendDeferred(_ log: OperationLog, count: Int, from first: Int = 0,
                               results: StorageShared<[Int: Result<RecordLocation, StorageError>]>,
                               done: DispatchSemaphore) {
        for index in first..<(first + count) {
            log.append(.created(StorageSamples.request(index), OperationState()), deferred: true) { result in
                results.withLock { $0[index] = result }
                done.signal()
            }
        }
    }

    /// Waits off the cooperative pool for `count` signals, 30 s at most each (a failing test).
    static func wait(_ semaphore: DispatchSemaphore, count: Int) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            DispatchQueue.global().async {
                let all = (0..<count).allSatisfy { _ in semaphore.wait(timeout: .now() + 30) == .success }
                continuation.resume(returning: all)
            }
        }
    }

    @Test func deferredRecords_WaitForAHurry_ThenShareOneSync() async throws {
        let directory = try StorageTestDirectory()
        let counting = CountingIO()
        let (log, _) = try StorageSamples.open(directory, options: .init(io: counting.io, maxDeferNanos: Self.never))
        defer { log.close() }
        let opened = counting.syncs.value  // creating the first segment syncs it
        let results = StorageShared<[Int: Result<RecordLocation, StorageError>]>([:])
        let done = DispatchSemaphore(value: 0)
        Self.appendDeferred(log, count: 10, results: results, done: done)
        log.hurry()
        #expect(await Self.wait(done, count: 10))
        #expect(counting.syncs.value - opened == 1, "\(counting.syncs.value - opened) syncs for 10 deferred records")
        let locations = try results.value.values.map { try $0.get() }
        #expect(Set(locations).count == 10)
        for (index, location) in results.value.map({ ($0.key, try? $0.value.get()) }) {
            guard let location else { continue }
            #expect(try log.readRequest(at: location).target == "/v1/items/\(index)")
        }
    }

    @Test func aRecordSomeoneWaitsFor_TakesTheDeferredOnesAlong() async throws {
        let directory = try StorageTestDirectory()
        let counting = CountingIO()
        let (log, _) = try StorageSamples.open(directory, options: .init(io: counting.io, maxDeferNanos: Self.never))
        defer { log.close() }
        let opened = counting.syncs.value
        let results = StorageShared<[Int: Result<RecordLocation, StorageError>]>([:])
        let done = DispatchSemaphore(value: 0)
        Self.appendDeferred(log, count: 5, results: results, done: done)
        _ = try await log.append(.created(StorageSamples.request(99), OperationState()))
        // The deferred records were ahead of it in the same batch, so they completed first.
        #expect(results.value.count == 5)
        #expect(results.value.values.allSatisfy { (try? $0.get()) != nil })
        #expect(counting.syncs.value - opened == 1)
    }

    @Test func enoughDeferredRecords_StartASyncByThemselves() async throws {
        let directory = try StorageTestDirectory()
        let counting = CountingIO()
        let (log, _) = try StorageSamples.open(
            directory, options: .init(io: counting.io, maxDeferNanos: Self.never, maxDeferredRecords: 8))
        defer { log.close() }
        let results = StorageShared<[Int: Result<RecordLocation, StorageError>]>([:])
        let done = DispatchSemaphore(value: 0)
        Self.appendDeferred(log, count: 8, results: results, done: done)
        #expect(await Self.wait(done, count: 8))
        #expect(results.value.values.allSatisfy { (try? $0.get()) != nil })
    }

    @Test func aDeferredRecord_IsWrittenOnceItsTimeIsUp_WithNothingElseHappening() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory, options: .init(maxDeferNanos: 20_000_000))
        defer { log.close() }
        let results = StorageShared<[Int: Result<RecordLocation, StorageError>]>([:])
        let done = DispatchSemaphore(value: 0)
        Self.appendDeferred(log, count: 1, results: results, done: done)
        #expect(await Self.wait(done, count: 1))
        let location = try #require(try results.value[0]?.get())
        #expect(try log.readRequest(at: location).target == "/v1/items/0")
    }

    @Test func close_WritesTheDeferredRecords_AndAReopenFindsThem() async throws {
        let directory = try StorageTestDirectory()
        let options = OperationLog.Options(maxDeferNanos: Self.never)
        let (log, _) = try StorageSamples.open(directory, options: options)
        let results = StorageShared<[Int: Result<RecordLocation, StorageError>]>([:])
        let done = DispatchSemaphore(value: 0)
        Self.appendDeferred(log, count: 3, results: results, done: done)
        log.close()
        // close() returns after every pending completion ran.
        #expect(results.value.count == 3)
        #expect(results.value.values.allSatisfy { (try? $0.get()) != nil })
        let (reopened, recovered) = try StorageSamples.open(directory, options: options)
        defer { reopened.close() }
        #expect(Set(recovered.map(\.operation.target)) == ["/v1/items/0", "/v1/items/1", "/v1/items/2"])
    }
}

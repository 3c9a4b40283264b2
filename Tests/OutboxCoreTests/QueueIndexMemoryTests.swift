import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxQueue
import Testing

/// The index's memory per operation. Memory used is measured by `Benchmarks/index-memory.sh`,
/// which runs this test alone in a release build with QUEUE_INDEX_MEMORY_ENTRIES (a million by
/// default) and then checks the resident-set growth: in the suite, other tests allocate beside
/// it and a million entries take tens of seconds of CPU in a debug build. The suite keeps the
/// structural check: 16 384 entries (2^14, where the doubling arrays are exactly full) are all
/// found, and one entry's record stays within the stride that the budget was made with.
@Suite("Queue index: memory per operation", .serialized)
struct QueueIndexMemoryTests {
    /// What a storage layer might keep per operation: the creation record's and the latest
    /// state record's place (segment, offset, length each).
    struct TwoRecordLocator: Sendable {
        var createdSegment: UInt32
        var createdLength: UInt32
        var createdOffset: UInt64
        var stateOffset: UInt64
        var stateSegment: UInt32
        var stateLength: UInt32
    }

    /// Resident set size from /proc/self/statm (`mallinfo2` is not exported by the Glibc
    /// module). Other tests running meanwhile allocate kilobytes, noise next to ~100 MB.
    static func residentBytes() throws -> Int {
        let statm = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8)
        let fields = statm.split(separator: " ")
        let pages = try #require(fields.count > 1 ? Int(fields[1]) : nil)
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The record stride the 200 bytes per entry were measured with (`Benchmarks/index-memory.sh`):
    /// a field added to the record shows here, and the benchmark says what it costs.
    static let recordStrideBudget = 120

    @Test("every entry is found, and a record keeps the stride the memory budget was measured with")
    func bytesPerEntry() throws {
        let total = ProcessInfo.processInfo.environment["QUEUE_INDEX_MEMORY_ENTRIES"].flatMap { Int($0) } ?? 16_384
        let origins = (0..<8).map { Origin(scheme: .http, host: "origin\($0).local", port: 9000) }
        let before = try Self.residentBytes()
        var index = QueueIndex<TwoRecordLocator>()
        var ids: [UUID] = []
        ids.reserveCapacity(8)
        for n in 0..<total {
            let id = UUID()
            if n % 125_000 == 0 { ids.append(id) }
            // Realistic mix: generated lowercase UUID keys, a few tags, a retried head per origin.
            let key = n % 10 == 0 ? "client-key-\(n)" : UUID().uuidString.lowercased()
            let state = n < 8 ? OperationState(retryCount: 1, nextAttemptAt: 5_000, lastError: "HTTP 503") : OperationState()
            try index.insert(id: id, origin: origins[n % origins.count], idempotencyKey: key,
                             priority: n % 7 == 0 ? .high : .normal, tag: n % 5 == 0 ? "batch-\(n % 3)" : nil,
                             dependsOn: nil, createdAt: Int64(n), state: state,
                             locator: TwoRecordLocator(createdSegment: 1, createdLength: 200, createdOffset: UInt64(n) * 200,
                                                       stateOffset: 0, stateSegment: 0, stateLength: 0))
        }
        let after = try Self.residentBytes()
        let residentPerEntry = Double(after - before) / Double(total)
        let footprint = index.footprintBytes
        let megabytes = Double(footprint) / 1_048_576
        print("QueueIndex memory for \(total) entries: footprint \(String(format: "%.1f", megabytes)) MiB = \(String(format: "%.1f", Double(footprint) / Double(total))) bytes/entry; resident-set growth \(String(format: "%.1f", residentPerEntry)) bytes/entry (includes freed array buffers the allocator keeps); record stride \(MemoryLayout<QueueIndex<TwoRecordLocator>.Record>.stride) bytes")
        #expect(index.count == total)
        #expect(index.count(of: .pending) == total)
        for id in ids { #expect(index.entry(id)?.id == id) }
        let stride = MemoryLayout<QueueIndex<TwoRecordLocator>.Record>.stride
        #expect(stride <= Self.recordStrideBudget,
                "a record takes \(stride) bytes, over the \(Self.recordStrideBudget) the memory budget was measured with: rerun Benchmarks/index-memory.sh")
        // The benchmark's check, on its own run: a million operations in at most 200 MiB of
        // resident memory (the default queue.maxOperations at about 200 bytes each, as README says).
        if ProcessInfo.processInfo.environment["QUEUE_INDEX_MEMORY_ENTRIES"] != nil {
            #expect(residentPerEntry <= 200, "resident set grew by \(Int(residentPerEntry)) bytes per entry")
        }
    }
}

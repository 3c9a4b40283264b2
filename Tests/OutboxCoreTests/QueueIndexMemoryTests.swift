import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxQueue
import Testing

/// The index's memory per operation. The suite measures 16 384 entries (2^14): the table's
/// arrays double as they grow, so at a power of two they are exactly full and the bytes per
/// entry are the per-slot cost that a million entries (in a 2^20 table) pay too. The million
/// itself is a benchmark (`Benchmarks/index-memory.sh` sets QUEUE_INDEX_MEMORY_ENTRIES): it
/// takes tens of seconds of CPU in a debug build, which would starve the rest of the suite.
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

    @Test("a full table costs at most 200 bytes per entry, so 1 000 000 operations fit in 200 MiB")
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
        // A million entries live in a table sized for 2^20: at most 2^20 × 200 B = 200 MiB.
        #expect(Double(footprint) / Double(total) <= 200, "\(footprint) bytes for \(total) entries")
        if total >= 1_000_000 { #expect(megabytes < 200) }
    }
}

import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxStorage
import Testing

/// A request whose body is in a spill file is stored exactly as if its body were an array:
/// the encoder copies the file into the record in pieces; a file that cannot be read back
/// makes the append fail and leaves the log as it was.
@Suite("Storage: spilled request bodies")
struct StorageSpilledBodyTests {
    /// `bytes` written to a fresh spill file in `directory`.
    private static func spilled(_ bytes: [UInt8], in directory: String) throws -> SpilledBody {
        let file = try SpillFile.create(in: directory).get()
        if let failure = bytes.withUnsafeBytes({ file.write($0, at: 0) }) { throw failure }
        return SpilledBody(file: file, count: bytes.count)
    }

    @Test func aSpilledBody_IsStoredByteForByte_AsTheSameRequestWithItsBytesInMemory() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        // Longer than one piece of the encoder's copy (1 MiB), and not a multiple of it.
        let inMemory = StorageSamples.request(1, bodySize: 2_500_001)
        var fromFile = inMemory
        fromFile.body = []
        fromFile.spilledBody = try Self.spilled(inMemory.body, in: directory.path)
        #expect(RecordCodec.frameSize(.created(fromFile, OperationState()))
                == RecordCodec.frameSize(.created(inMemory, OperationState())))
        var first = [UInt8](repeating: 0, count: RecordCodec.frameSize(.created(inMemory, OperationState())))
        var second = first
        try first.withUnsafeMutableBytes { try RecordCodec.encode(.created(inMemory, OperationState()), into: $0) }
        try second.withUnsafeMutableBytes { try RecordCodec.encode(.created(fromFile, OperationState()), into: $0) }
        #expect(first == second, "the same frame, whichever way the body was held")

        let location = try await log.append(.created(fromFile, OperationState()))
        #expect(try log.readRequest(at: location) == inMemory)
        log.close()
        let (reopened, recovered) = try StorageSamples.open(directory)
        defer { reopened.close() }
        #expect(recovered.map(\.operation.id) == [inMemory.id])
        #expect(try reopened.readRequest(at: location).body == inMemory.body)
    }

    @Test func aSpillFileShorterThanItsBody_FailsTheAppend_AndTheLogGoesOnWithoutIt() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let before = try await log.append(.created(StorageSamples.request(1), OperationState()))
        var broken = StorageSamples.request(2, bodySize: 0)
        let short = try Self.spilled([1, 2, 3], in: directory.path)
        broken.spilledBody = SpilledBody(file: short.file, count: 3 << 20)
        await #expect(throws: StorageError.self) { try await log.append(.created(broken, OperationState())) }
        let after = try await log.append(.created(StorageSamples.request(3), OperationState()))
        #expect(after.offset == before.offset + UInt64(before.length), "nothing of the failed record was written")
        log.close()
        let (reopened, recovered) = try StorageSamples.open(directory)
        defer { reopened.close() }
        #expect(recovered.count == 2)
        #expect(!recovered.contains { $0.operation.id == broken.id })
    }
}

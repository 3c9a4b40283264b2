import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxProxy
import Testing

/// The spill decision: a kept body stays in memory while the budget allows and moves to an
/// unlinked 0600 file in the data directory the moment it does not, with its memory and budget
/// given back; every byte reads back the same either way.
@Suite("Request body buffer: memory within the budget, a spill file beyond it")
struct RequestBodyBufferTests {
    private static func bytes(_ count: Int, seed: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ seed &+ $0 >> 9) }
    }

    /// Every kept byte, read back in pieces as the forward reads them.
    private static func readBack(_ body: RequestBodyBuffer) throws -> [UInt8] {
        var out: [UInt8] = []
        var scratch: [UInt8] = []
        var offset = 0
        while offset < body.count {
            offset += try body.read(from: offset, atMost: RequestBodyBuffer.filePiece, scratch: &scratch) {
                out.append(contentsOf: $0)
            }.get()
        }
        return out
    }

    private static func append(_ bytes: [UInt8], to body: inout RequestBodyBuffer, pieces: Int,
                               lease: BodyMemoryBudget.Lease, directory: String) throws {
        let size = max(1, bytes.count / pieces)
        for start in stride(from: 0, to: bytes.count, by: size) {
            let end = min(bytes.count, start + size)
            let failure = bytes[start..<end].withUnsafeBytes { body.append($0, lease: lease, directory: directory) }
            if let failure { throw failure }
        }
    }

    @Test func aBodyWithinTheBudget_StaysInMemory_AndIsChargedUntilReleased() throws {
        let directory = try StorageTestDirectory()
        let budget = BodyMemoryBudget(limit: 1 << 20)
        let lease = BodyMemoryBudget.Lease(budget)
        var body = RequestBodyBuffer()
        let sent = Self.bytes(100_000, seed: 1)
        try Self.append(sent, to: &body, pieces: 7, lease: lease, directory: directory.path)
        #expect(!body.isSpilled)
        #expect(body.reserved >= sent.count && body.reserved >= body.memory.capacity, "charged by capacity")
        #expect(budget.inUse >= body.reserved)
        #expect(try Self.readBack(body) == sent)
        body.release(to: lease) { _ in }
        #expect(body.count == 0 && body.reserved == 0)
        #expect(budget.inUse == lease.credit, "only the lease's credit is still taken")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test func aChunkedBodyOutgrowingTheBudget_MovesToAnUnlinkedPrivateFile_AndGivesItsMemoryBack() throws {
        let directory = try StorageTestDirectory()
        let budget = BodyMemoryBudget(limit: 256 * 1024)
        let lease = BodyMemoryBudget.Lease(budget)
        var body = RequestBodyBuffer()
        let sent = Self.bytes(1_000_003, seed: 2)
        try Self.append(sent, to: &body, pieces: 40, lease: lease, directory: directory.path)
        #expect(body.isSpilled)
        #expect(body.memory.isEmpty && body.reserved == 0)
        #expect(budget.inUse == lease.credit, "the memory's budget went back when the body moved")
        // Unlinked at once: nothing in the directory, yet the file is open, private and whole.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        let file = try #require(body.spill)
        var info = stat()
        #expect(fstat(file.fd, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(info.st_nlink == 0)
        #expect(Int(info.st_size) == sent.count)
        #expect(try Self.readBack(body) == sent)
        var scratch: [UInt8] = []
        #expect(try body.fingerprint(method: "POST", target: "/t", scratch: &scratch).get()
                == IdempotencyKey.fingerprint(method: "POST", target: "/t", body: sent))
        #expect(try SpilledBody(file: file, count: body.count).bytes().get() == sent)
        body.release(to: lease) { _ in }
        #expect(body.spill == nil)
    }

    @Test func aBodyAnnouncingMoreThanTheBudget_GoesToAFileFromItsFirstByte() throws {
        let directory = try StorageTestDirectory()
        let budget = BodyMemoryBudget(limit: 64 * 1024)
        let lease = BodyMemoryBudget.Lease(budget)
        var body = RequestBodyBuffer()
        body.keepWhole(expectedLength: 200_000)
        let first = Self.bytes(10, seed: 3)
        let failure = first.withUnsafeBytes { body.append($0, lease: lease, directory: directory.path) }
        #expect(failure == nil)
        #expect(body.isSpilled, "no memory is grown for a body that cannot fit whole")
        #expect(budget.inUse == 0)
    }

    @Test func aBodyAnnouncingWhatFits_ReservesItAllAtOnce() throws {
        let directory = try StorageTestDirectory()
        let budget = BodyMemoryBudget(limit: 1 << 20)
        let lease = BodyMemoryBudget.Lease(budget)
        var body = RequestBodyBuffer()
        body.keepWhole(expectedLength: 300_000)
        let sent = Self.bytes(300_000, seed: 4)
        try Self.append(sent, to: &body, pieces: 30, lease: lease, directory: directory.path)
        #expect(!body.isSpilled)
        #expect(body.reserved >= 300_000 && body.memory.capacity < 400_000, "no doubling past what was announced: \(body.reserved)")
        #expect(try Self.readBack(body) == sent)
    }

    @Test func aResendCopyIsKeptOnlyWhenAffordable_NeverSpilled() throws {
        let budget = BodyMemoryBudget(limit: 32 * 1024)
        let lease = BodyMemoryBudget.Lease(budget)
        var body = RequestBodyBuffer()
        let small = Self.bytes(1000, seed: 5)
        #expect(small.withUnsafeBytes { body.appendIfAffordable($0, lease: lease) })
        let large = Self.bytes(40_000, seed: 6)
        #expect(!large.withUnsafeBytes { body.appendIfAffordable($0, lease: lease) })
        #expect(!body.isSpilled)
        #expect(body.count == 1000)
    }

    @Test func aSpillFileThatCannotBeMade_IsAFailure_NotACrash() throws {
        let budget = BodyMemoryBudget(limit: 0)
        let lease = BodyMemoryBudget.Lease(budget)
        var body = RequestBodyBuffer()
        let failure = Self.bytes(10, seed: 7).withUnsafeBytes {
            body.append($0, lease: lease, directory: "/nonexistent-outbox-spill-directory")
        }
        #expect(failure?.code == ENOENT)
    }

    @Test func leftoversOfACrash_AreRemovedAtStart_AndNothingElse() throws {
        let directory = try StorageTestDirectory()
        for name in ["spill-a1B2c3", "spill-zzzzzz", "00000001.log", "spill-toolongname", "notes"] {
            #expect(FileManager.default.createFile(atPath: directory.path + "/" + name, contents: Data([1])))
        }
        #expect(SpillFile.removeLeftovers(in: directory.path) == 2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
                == ["00000001.log", "notes", "spill-toolongname"])
    }
}

import Foundation
import Glibc
@testable import OutboxConfig
@testable import OutboxModel
@testable import OutboxQueue
@testable import OutboxStorage
@testable import OutboxTelemetry
import Testing

/// The queue on a real log in a temporary directory: what a client is told when storing an
/// operation meets a key or an id that is already indexed, or a record that cannot be read.
@Suite("Queue: enqueue answers")
struct QueueEnqueueTests {
    /// A queue over `directory`, logging into `lines`.
    static func open(_ directory: StorageTestDirectory, lines: StorageLogLines,
                     logOptions: OperationLog.Options = .init()) throws -> OutboxQueue {
        var config = OutboxConfig()
        config.dataDirectory = directory.logPath
        return try OutboxQueue(config: config, reachability: Reachability(probeIntervalSeconds: 1, probe: { _ in true }),
                               logger: lines.logger, metrics: Metrics(), logOptions: logOptions)
    }

    static func enqueue(_ request: OperationRequest, into queue: OutboxQueue) async -> Result<OperationSnapshot, EnqueueError> {
        await withCheckedContinuation { continuation in
            queue.enqueue(request) { continuation.resume(returning: $0) }
        }
    }

    /// `request` with another id (and, when given, another key or fingerprint): a second client's write.
    static func another(_ request: OperationRequest, id: UUID = UUID(), key: String? = nil, fingerprint: [UInt8]? = nil) -> OperationRequest {
        var copy = request
        copy.id = id
        if let key { copy.idempotencyKey = key }
        if let fingerprint { copy.fingerprint = fingerprint }
        return copy
    }

    @Test func aKeyStoredAfterTheProxysLookup_IsAnsweredWithTheStoredOperation_AndNothingIsWritten() async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        let queue = try Self.open(directory, lines: lines)
        let first = StorageSamples.request(1)
        let stored = try await Self.enqueue(first, into: queue).get()
        let bytesBefore = queue.storageBytes

        // The proxy found the key free before the first write was indexed; its enqueue comes now.
        let repeated = try await Self.enqueue(Self.another(first), into: queue).get()
        #expect(repeated.id == stored.id, "the client of the repeat was given an id the queue does not hold")
        #expect(queue.storageBytes == bytesBefore, "a second record was written for the key")
        let conflicting = await Self.enqueue(Self.another(first, fingerprint: [UInt8](repeating: 7, count: 32)), into: queue)
        #expect(conflicting == .failure(.keyConflict))
        queue.close()

        let reopened = try Self.open(directory, lines: lines)
        defer { reopened.close() }
        #expect(reopened.counts[.pending] == 1)
        #expect(try reopened.operation(withKey: first.idempotencyKey, origin: StorageSamples.origin)?.id == first.id)
    }

    @Test func anOperationUnderAKeyTheProxyMadeUp_IsIndexedByIt_AndARepeatOfThatKeyFindsIt() async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        let queue = try Self.open(directory, lines: lines)
        // A request that came without a key: the proxy makes one up and says so.
        let madeUp = UUID()
        let fresh = Self.another(StorageSamples.request(1), key: madeUp.lowercasedText)
        let stored = try await withCheckedContinuation { continuation in
            queue.enqueue(fresh, freshKey: madeUp) { continuation.resume(returning: $0) }
        }.get()
        #expect(stored.id == fresh.id)
        #expect(try queue.operation(withKey: fresh.idempotencyKey, origin: StorageSamples.origin)?.id == fresh.id)
        // The client learnt the key from the 202 and retries with it: the same operation.
        let repeated = try await Self.enqueue(Self.another(fresh), into: queue).get()
        #expect(repeated.id == fresh.id)
        queue.close()

        let reopened = try Self.open(directory, lines: lines)
        defer { reopened.close() }
        #expect(reopened.counts[.pending] == 1)
        #expect(try reopened.operation(withKey: fresh.idempotencyKey, origin: StorageSamples.origin)?.id == fresh.id)
    }

    @Test func anOperationTheIndexRefusesAfterItsAppend_IsAnErrorForItsClient_AndStaysRefusedAfterARestart() async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        let queue = try Self.open(directory, lines: lines)
        let first = StorageSamples.request(1)
        _ = try await Self.enqueue(first, into: queue).get()

        // Another key under an id already indexed: only the insert after the durable append refuses it.
        let clash = Self.another(first, id: first.id, key: "another-key")
        let answer = await Self.enqueue(clash, into: queue)
        guard case .failure(.storage(let reason)) = answer else {
            Issue.record("the client was told \(answer) for an operation the index does not hold")
            return
        }
        #expect(reason.contains(first.id.lowercasedText), "\(reason)")
        #expect(lines.containing("enqueue_not_indexed").contains { $0.contains(first.id.lowercasedText) }, "\(lines.all)")
        #expect(try queue.operation(withKey: "another-key", origin: StorageSamples.origin) == nil)
        #expect(queue.counts[.pending] == 1)
        queue.close()

        let reopened = try Self.open(directory, lines: lines)
        defer { reopened.close() }
        #expect(reopened.counts[.pending] == 1)
        #expect(try reopened.operation(withKey: first.idempotencyKey, origin: StorageSamples.origin)?.id == first.id)
        #expect(try reopened.operation(withKey: "another-key", origin: StorageSamples.origin) == nil)
    }

    @Test func aKeyWhoseRecordCannotBeRead_IsAReadError_NeverAFreeKey() async throws {
        let directory = try StorageTestDirectory()
        let lines = StorageLogLines()
        let queue = try Self.open(directory, lines: lines)
        defer { queue.close() }
        let first = StorageSamples.request(1, bodySize: 200)
        _ = try await Self.enqueue(first, into: queue).get()
        try Self.damage(first.body, in: directory.segmentPath(1))

        #expect(throws: QueueReadError.self) { try queue.operation(withKey: first.idempotencyKey, origin: StorageSamples.origin) }
        #expect(lines.containing("storage_read_failed").contains { $0.contains(first.id.lowercasedText) }, "\(lines.all)")
        let repeated = await Self.enqueue(Self.another(first), into: queue)
        guard case .failure(.storage) = repeated else {
            Issue.record("the repeat of an unreadable key was answered \(repeated)")
            return
        }
        #expect(queue.counts[.pending] == 1)
        // The lane neither skips nor drops it: it keeps trying, seconds apart, not every 50 ms.
        guard case .wait(until: let retryAt) = queue.takeWork(for: first.origin, now: 5_000) else {
            Issue.record("the lane went past an operation it could not read")
            return
        }
        #expect(retryAt == 6_000)
    }

    /// The same, with the repeat sent the moment the first writer hears its answer (from inside
    /// its completion, on the log's writer thread): the key's reservation has ended by then, so
    /// the repeat reads the damaged record and fails, instead of being handed the first
    /// writer's outcome from memory. Under load, `swift test` hit that window now and then.
    @Test func aRepeatSentAsTheFirstWriterIsAnswered_ReadsTheStoredRecord() async throws {
        let directory = try StorageTestDirectory()
        let queue = try Self.open(directory, lines: StorageLogLines())
        defer { queue.close() }
        let first = StorageSamples.request(1, bodySize: 200)
        let segment = directory.segmentPath(1)
        let (stored, repeated) = await withCheckedContinuation { continuation in
            queue.enqueue(first) { stored in
                do { try Self.damage(first.body, in: segment) } catch { Issue.record("\(error)") }
                queue.enqueue(Self.another(first)) { continuation.resume(returning: (stored, $0)) }
            }
        }
        #expect((try? stored.get())?.id == first.id)
        guard case .failure(.storage) = repeated else {
            Issue.record("the repeat was answered \(repeated), not from the stored record")
            return
        }
    }

    /// Flips one byte of `bytes` where they occur in the file at `path`, in place (the log keeps
    /// reading the same inode).
    static func damage(_ bytes: [UInt8], in path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else { throw StorageTestFailure("cannot read \(path)") }
        let content = [UInt8](data)
        guard let start = (0...(content.count - bytes.count)).first(where: { content[$0..<$0 + bytes.count].elementsEqual(bytes) }) else {
            throw StorageTestFailure("the bytes are not in \(path)")
        }
        let fd = Glibc.open(path, O_WRONLY)
        guard fd >= 0 else { throw StorageTestFailure("cannot open \(path)") }
        defer { close(fd) }
        var flipped = content[start + bytes.count / 2] ^ 0xFF
        guard pwrite(fd, &flipped, 1, off_t(start + bytes.count / 2)) == 1 else { throw StorageTestFailure("cannot write \(path)") }
    }
}

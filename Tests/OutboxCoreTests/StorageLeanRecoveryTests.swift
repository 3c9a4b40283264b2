import Foundation
@testable import OutboxModel
@testable import OutboxStorage
import Synchronization
import Testing

/// Recovery as `RecoveryRecord`s, the queue's restart path: fields as bytes, and an origin
/// that a record carries as changed only where it differs from the record before it.
@Suite struct StorageLeanRecoveryTests {
    private static let originB = Origin(scheme: .https, host: "b.example.test", port: 443)

    /// What a test keeps of a record (the record itself must not outlive the call).
    private struct Kept: Sendable {
        var id: UUID
        var kind: RecoveryRecord.Kind
        var origin: Origin?
        var key: String
        var tag: String?
        var status: OperationStatus
        var lastError: String?
    }

    @Test func followingOriginChanged_GivesEveryOperationItsOrigin_AcrossSegmentsAndParallelReaders() async throws {
        let directory = try StorageTestDirectory()
        let options = OperationLog.Options(segmentBytes: 2 << 10)
        let (log, _) = try StorageSamples.open(directory, options: options)
        var written: [(UUID, Origin)] = []
        // Runs of 8 operations per origin, some spanning a segment boundary, and a single one.
        for index in 0..<120 {
            var request = StorageSamples.request(index, bodySize: 40)
            request.origin = (index / 8) % 2 == 0 && index != 50 ? StorageSamples.origin : Self.originB
            if index % 7 == 0 { request.tag = "tag-\(index)" }
            written.append((request.id, request.origin))
            _ = try await log.append(.created(request, OperationState()))
            if index % 10 == 9 {
                let state = OperationState(status: .failed, retryCount: 2, lastError: "HTTP 500 #\(index)")
                _ = try await log.append(.updated(request.id, state))
            }
        }
        log.close()
        #expect(try directory.fileNames().count > 10)

        var estimate = -1
        var kept: [Kept] = []
        let reopened = try OperationLog.open(directory: directory.logPath, options: options, logger: StorageLogLines().logger,
                                             readers: 4, reserve: { estimate = $0 }, prepare: { record in
            Kept(id: record.id, kind: record.kind, origin: record.originChanged ? record.origin : nil,
                 key: String(decoding: record.idempotencyKey, as: UTF8.self),
                 tag: record.tag.map { String(decoding: $0, as: UTF8.self) }, status: record.status,
                 lastError: record.lastError.map { String(decoding: $0, as: UTF8.self) })
        }) { kept.append($0) }
        reopened.close()

        #expect(estimate > 0)
        var current: Origin?
        var recovered: [(UUID, Origin?)] = []
        for record in kept where record.kind == .created {
            if let origin = record.origin { current = origin }
            recovered.append((record.id, current))
        }
        #expect(recovered.map(\.0) == written.map(\.0))
        #expect(recovered.map(\.1) == written.map(\.1))
        // Runs are kept: far fewer records carry an origin than there are records.
        let carried = kept.filter { $0.origin != nil }.count
        #expect(carried > 1 && carried < written.count / 2)
        let created = kept.filter { $0.kind == .created }
        #expect(created.map(\.key) == (0..<120).map { "key-\($0)" })
        #expect(created.filter { $0.tag != nil }.map(\.tag) == stride(from: 0, to: 120, by: 7).map { "tag-\($0)" })
        let updates = kept.filter { $0.kind == .updated }
        #expect(updates.count == 12)
        #expect(updates.allSatisfy { $0.status == .failed && $0.lastError?.hasPrefix("HTTP 500 #") == true })
    }
}

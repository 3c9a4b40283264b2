import Foundation
@testable import OutboxModel
@testable import OutboxStorage
import Testing

/// Recovery as the queue runs it: an estimate of the record count first, then summaries
/// without the request fields an index never keeps.
@Suite struct StorageIndexRecoveryTests {
    /// Every event of a recovery, in order.
    private static func events(_ directory: StorageTestDirectory, requestFields: Bool,
                               options: OperationLog.Options = .init()) throws -> [OperationLog.RecoveryEvent] {
        var events: [OperationLog.RecoveryEvent] = []
        let log = try OperationLog.open(directory: directory.logPath, options: options, logger: StorageLogLines().logger,
                                        requestFields: requestFields) { events.append($0) }
        log.close()
        return events
    }

    @Test func theEstimateComesFirst_AndCountsSameSizedRecordsExactly_AcrossSegments() async throws {
        let directory = try StorageTestDirectory()
        let options = OperationLog.Options(segmentBytes: 8 << 10)
        let (log, _) = try StorageSamples.open(directory, options: options)
        // Same-sized records: indexes 100..<140 all have 3-digit numbers in target and key.
        for index in 100..<140 { _ = try await log.append(.created(StorageSamples.request(index, bodySize: 500), OperationState())) }
        log.close()
        #expect(try directory.fileNames().count > 1)
        let events = try Self.events(directory, requestFields: false, options: options)
        guard case .expect(let records) = events.first else {
            Issue.record("first event is \(String(describing: events.first)), not the estimate")
            return
        }
        #expect(records == 40)
        #expect(events.count == 41)
    }

    @Test func anEmptyLog_EstimatesNothing() throws {
        let directory = try StorageTestDirectory()
        let events = try Self.events(directory, requestFields: false)
        guard case .expect(let records) = events.first else {
            Issue.record("no estimate: \(events)")
            return
        }
        #expect(records == 0)
        #expect(events.count == 1)
    }

    @Test func withoutRequestFields_MethodTargetAndFingerprintAreEmpty_AndEverythingElseIsKept() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        var request = StorageSamples.request(7)
        request.tag = "batch-7"
        request.dependsOn = UUID()
        let state = OperationState(status: .pending, retryCount: 2, lastAttemptAt: 5, nextAttemptAt: 9, lastError: "HTTP 503")
        let location = try await log.append(.created(request, state))
        log.close()
        let full = try Self.events(directory, requestFields: true).compactMap { event -> OperationSnapshot? in
            if case .created(let operation, _) = event { return operation }
            return nil
        }
        let lean = try Self.events(directory, requestFields: false).compactMap { event -> (OperationSnapshot, RecordLocation)? in
            if case .created(let operation, let at) = event { return (operation, at) }
            return nil
        }
        #expect(full == [OperationSnapshot(request, state: state)])
        let (operation, at) = try #require(lean.first)
        #expect(lean.count == 1)
        #expect(at == location)
        #expect(operation.method.isEmpty)
        #expect(operation.target.isEmpty)
        #expect(operation.fingerprint.isEmpty)
        var expected = OperationSnapshot(request, state: state)
        expected.method = ""
        expected.target = ""
        expected.fingerprint = []
        #expect(operation == expected)
    }
}

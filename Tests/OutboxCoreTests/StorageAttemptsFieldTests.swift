import Foundation
import OutboxHTTP
@testable import OutboxModel
@testable import OutboxStorage
import Testing

/// The state's `attempts` field (flag 128), added after the format was in use: every count round
/// trips, a state without the field reads back with the count its retry count implied (what a
/// record written before the field says), so a record without an attempt beyond that is as it always was.
@Suite("Storage: the attempts field of a state")
struct StorageAttemptsFieldTests {
    @Test("every attempt count round trips through the log and recovery, implied or written", arguments: [
        OperationState(status: .pending, retryCount: 2, lastAttemptAt: 9, nextAttemptAt: 20, attempts: 2),
        OperationState(status: .pending, retryCount: 0, attempts: 7),
        OperationState(status: .inProgress, retryCount: 1, lastAttemptAt: 9, attempts: 5),
        OperationState(status: .completed, retryCount: 0, lastAttemptAt: 9, attempts: 1),
        OperationState(status: .failed, retryCount: 0, lastAttemptAt: 9, lastError: "HTTP 400", attempts: 0),
        OperationState(status: .failed, retryCount: 3, lastError: "dependency failed", attempts: 3),
    ])
    func attemptsRoundTrip(state: OperationState) async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let request = StorageSamples.request(1)
        _ = try await log.append(.created(request, OperationState()))
        let at = try await log.append(.updated(request.id, state))
        #expect(try log.readState(at: at) == state)
        log.close()
        let (reopened, recovered) = try StorageSamples.open(directory)
        defer { reopened.close() }
        #expect(recovered.first?.operation.state.attempts == state.attempts)
    }

    @Test("the attempts field and the omitted-body flags are bits of their own: every combination round trips")
    func attemptsBesideOmittedBodies() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        defer { log.close() }
        let request = StorageSamples.request(1)
        _ = try await log.append(.created(request, OperationState()))
        let kept = StoredResponse(status: 201, headers: ["A": "b"], body: Array("kept".utf8))
        let omitted = StoredResponse(status: 200, headers: ["C": "d"], body: [], omittedBodySize: 2 << 20)
        for response in [kept, omitted] {
            for conflict in [nil, kept, omitted] {
                for attempts in [1, 6] {  // 1 is what a completed state implies, 6 is written
                    let state = OperationState(status: .completed, retryCount: 0, lastAttemptAt: 9, response: response,
                                               conflict: conflict, attempts: attempts)
                    let at = try await log.append(.updated(request.id, state))
                    #expect(try log.readState(at: at) == state)
                }
            }
        }
    }

    @Test("a state whose count is the one its retry count implies is written as before the field: no bytes more")
    func impliedCountsAddNoBytes() {
        let implied = OperationState(status: .pending, retryCount: 4, lastAttemptAt: 9, attempts: 4)
        var written = implied
        written.attempts = 5
        let id = UUID()
        #expect(RecordCodec.frameSize(.updated(id, written)) == RecordCodec.frameSize(.updated(id, implied)) + 4)
        // What a state record took before the field: id, status, flags, retryCount, lastAttemptAt
        // (the record's type is in the frame's header).
        #expect(RecordCodec.frameSize(.updated(id, implied)) == RecordFrame.headerSize + 16 + 1 + 1 + 8 + 8)
    }
}

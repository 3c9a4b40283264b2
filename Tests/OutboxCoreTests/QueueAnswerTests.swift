import Foundation
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxProxy
@testable import OutboxQueue
import Testing

@Suite("Queue answers: the 202 for a stored operation, the replay of a completed one")
struct QueueAnswerTests {
    @Test("202 carries the id three ways, the key under the configured header, and a JSON body")
    func accepted() {
        let info = OperationSnapshot(id: UUID(uuidString: "0F8E4C1A-1111-4222-8333-444455556666")!, origin: Origin(scheme: .http, host: "127.0.0.1", port: 9000), method: "POST",
                          target: "/pay", idempotencyKey: "pay-1", fingerprint: [], priority: .normal, tag: nil,
                          dependsOn: nil, createdAt: 1_700_000_123_456, state: OperationState(status: .pending))
        let answer = QueueAnswer.accepted(info, locationBase: "/admin/operations/", idempotencyHeader: "X-Request-Key")
        let body = #"{"id":"0f8e4c1a-1111-4222-8333-444455556666","status":"pending","idempotencyKey":"pay-1","queuedAt":"2023-11-14T22:15:23Z"}"#
            + "\n"
        #expect(String(decoding: answer.body, as: UTF8.self) == body)
        #expect(answer.head.status == 202)
        #expect(Array(answer.head.headers).map { "\($0.name): \($0.value)" } == [
            "Content-Type: application/json",
            "Content-Length: \(body.utf8.count)",
            "Location: /admin/operations/0f8e4c1a-1111-4222-8333-444455556666",
            "Outbox-Operation-Id: 0f8e4c1a-1111-4222-8333-444455556666",
            "X-Request-Key: pay-1",
        ])
    }

    @Test("a replay is the stored answer framed by its length and marked Idempotent-Replayed")
    func replayed() {
        let stored = StoredResponse(status: 201, headers: HTTPHeaders([
            (name: "Content-Type", value: "text/plain"), (name: "Transfer-Encoding", value: "chunked"),
            (name: "X-Upstream", value: "yes"), (name: "Content-Length", value: "99"),
        ]), body: Array("created".utf8))
        let answer = QueueAnswer.replayed(stored, operation: UUID(uuidString: "0F8E4C1A-1111-4222-8333-444455556666")!)
        #expect(answer.head.status == 201)
        #expect(answer.body == Array("created".utf8))
        #expect(Array(answer.head.headers).map { "\($0.name): \($0.value)" } == [
            "Content-Type: text/plain", "X-Upstream: yes", "Content-Length: 7",
            "Outbox-Operation-Id: 0f8e4c1a-1111-4222-8333-444455556666", "Idempotent-Replayed: true",
        ])
    }
}

import Foundation
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxProxy
@testable import OutboxQueue
import Testing

@Suite("Queue answers: the 202 for a stored operation, the replay of a completed one")
struct QueueAnswerTests {
    private static let id = UUID(uuidString: "0F8E4C1A-1111-4222-8333-444455556666")!

    private static func snapshot(key: String, status: OperationStatus = .pending, createdAt: Int64 = 1_700_000_123_456,
                                 id: UUID = QueueAnswerTests.id) -> OperationSnapshot {
        OperationSnapshot(id: id, origin: Origin(scheme: .http, host: "127.0.0.1", port: 9000), method: "POST",
                          target: "/pay", idempotencyKey: key, fingerprint: [], priority: .normal, tag: nil,
                          dependsOn: nil, createdAt: createdAt, state: OperationState(status: status))
    }

    private static func written(_ info: OperationSnapshot, locationBase: String = "/admin/operations/",
                                header: String = "X-Request-Key", connection: String? = nil, withBody: Bool = true,
                                after prefix: [UInt8] = []) -> (bytes: [UInt8], bodyCount: Int) {
        var out = prefix
        let template = QueueAnswer.AcceptedTemplate(locationBase: locationBase, idempotencyHeader: header)
        let count = QueueAnswer.writeAccepted(info, template: template, connection: connection, withBody: withBody,
                                              into: &out)
        return (out, count)
    }

    /// The `202` as it was built before its templates: a head of `HTTPHeaders` serialised by
    /// `HTTPSerializer` (the exchange adding `Connection` last) and a body rendered by `JSON`.
    private static func reference(_ info: OperationSnapshot, locationBase: String, header: String, connection: String?,
                                  withBody: Bool) -> (bytes: [UInt8], bodyCount: Int) {
        let id = UUIDText.lowercase(info.id)
        let text = JSON.object([
            ("id", .string(id)), ("status", .string(info.state.status.rawValue)),
            ("idempotencyKey", .string(info.idempotencyKey)), ("queuedAt", .string(WallClock.iso8601(millis: info.createdAt))),
        ]).rendered() + "\n"
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        headers.add("Content-Length", String(text.utf8.count))
        headers.add("Location", locationBase + id)
        headers.add("Outbox-Operation-Id", id)
        headers.add(header, info.idempotencyKey)
        if let connection { headers.add("Connection", connection) }
        var out: [UInt8] = []
        HTTPSerializer.writeResponseHead(HTTPResponseHead(status: 202, headers: headers), into: &out)
        if withBody { out += Array(text.utf8) }
        return (out, text.utf8.count)
    }

    @Test("202 carries the id three ways, the key under the configured header, and a JSON body")
    func accepted() {
        let (bytes, bodyCount) = Self.written(Self.snapshot(key: "pay-1"))
        let body = #"{"id":"0f8e4c1a-1111-4222-8333-444455556666","status":"pending","idempotencyKey":"pay-1","queuedAt":"2023-11-14T22:15:23Z"}"#
            + "\n"
        #expect(String(decoding: bytes, as: UTF8.self) == [
            "HTTP/1.1 202 Accepted",
            "Content-Type: application/json",
            "Content-Length: \(body.utf8.count)",
            "Location: /admin/operations/0f8e4c1a-1111-4222-8333-444455556666",
            "Outbox-Operation-Id: 0f8e4c1a-1111-4222-8333-444455556666",
            "X-Request-Key: pay-1",
            "", "",
        ].joined(separator: "\r\n") + body)
        #expect(bodyCount == body.utf8.count)
    }

    @Test("the written 202 is byte for byte the one built from HTTPHeaders and JSON",
          arguments: [
            ("pay-1", OperationStatus.pending, Int64(1_700_000_123_456), "/admin/operations/", nil, true),
            (#"quote"and\backslash"#, .inProgress, 0, "http://127.0.0.1:8081/admin/operations/", "close", true),
            ("0f8e4c1a-2222-4333-8444-555566667777", .failed, -1, "/ops/", "keep-alive", true),
            ("k", .completed, 951_782_400_000, "/admin/operations/", nil, false),  // 2000-02-29
            ("{}[]/<>", .conflict, 253_402_300_799_999, "/admin/operations/", "close", false),  // 9999-12-31T23:59:59
            ("year-10000", .pending, 253_402_300_800_000, "/admin/operations/", nil, true),
            ("before-1970", .pending, -62_135_596_800_000, "/admin/operations/", nil, true),  // 0001-01-01
            ("value\r\nInjected: yes", .pending, 1_700_000_000_000, "/a\nb/", nil, true),
            // Escaped in JSON, kept in the header: tab and DEL. Neither: bytes above ASCII.
            ("tab\tand\u{7F}", .pending, 1_700_000_000_000, "/admin/operations/", nil, true),
            ("clé-ünïcode-🔑", .pending, 1_700_000_000_000, "/admin/operations/", "close", true),
          ] as [(String, OperationStatus, Int64, String, String?, Bool)])
    func writtenMatchesTheGenericRendering(key: String, status: OperationStatus, createdAt: Int64, locationBase: String,
                                           connection: String?, withBody: Bool) {
        let info = Self.snapshot(key: key, status: status, createdAt: createdAt)
        let expected = Self.reference(info, locationBase: locationBase, header: "Idempotency-Key", connection: connection,
                                      withBody: withBody)
        let prefix = Array("HTTP/1.1 202 Accepted\r\n\r\n(an earlier pipelined answer)".utf8)
        let actual = Self.written(info, locationBase: locationBase, header: "Idempotency-Key", connection: connection,
                                  withBody: withBody, after: prefix)
        #expect(String(decoding: actual.bytes, as: UTF8.self) == String(decoding: prefix + expected.bytes, as: UTF8.self))
        #expect(actual.bodyCount == expected.bodyCount)
    }

    @Test("the 202 parses as one response whose Content-Length frames its JSON body exactly")
    func writtenParsesBack() throws {
        let info = Self.snapshot(key: #"a"b"#, id: UUID())
        let (bytes, _) = Self.written(info, connection: "close")
        var parser = HTTPResponseParser()
        parser.expectResponse(toMethod: "POST")
        var index = 0
        var events: [HTTPResponseParser.Event] = []
        while let event = try parser.next(in: bytes, index: &index) { events.append(event) }
        #expect(index == bytes.count, "bytes left after the response")
        guard case .head(let head, let framing) = events.first else {
            Issue.record("no head in \(events)")
            return
        }
        #expect(events.last == .end(trailers: HTTPHeaders()))
        #expect(head.status == 202)
        #expect(head.headers.first("Outbox-Operation-Id") == UUIDText.lowercase(info.id))
        #expect(head.headers.first("X-Request-Key") == #"a"b"#)
        #expect(head.headers.first("Connection") == "close")
        let body = events.flatMap { event -> [UInt8] in
            if case .body(let range) = event { return Array(bytes[range]) }
            return []
        }
        #expect(framing == .contentLength(body.count))
        let json = try JSONReader.parse(body)
        #expect(json["id"]?.stringValue == UUIDText.lowercase(info.id))
        #expect(json["idempotencyKey"]?.stringValue == #"a"b"#)
        #expect(json["status"]?.stringValue == "pending")
        #expect(json["queuedAt"]?.stringValue == WallClock.iso8601(millis: info.createdAt))
    }

    @Test("a replay is the stored answer framed by its length and marked Idempotent-Replayed")
    func replayed() {
        let stored = StoredResponse(status: 201, headers: HTTPHeaders([
            (name: "Content-Type", value: "text/plain"), (name: "Transfer-Encoding", value: "chunked"),
            (name: "X-Upstream", value: "yes"), (name: "Content-Length", value: "99"),
        ]), body: Array("created".utf8))
        let answer = QueueAnswer.replayed(stored, operation: Self.id)
        #expect(answer.head.status == 201)
        #expect(answer.body == Array("created".utf8))
        #expect(Array(answer.head.headers).map { "\($0.name): \($0.value)" } == [
            "Content-Type: text/plain", "X-Upstream: yes", "Content-Length: 7",
            "Outbox-Operation-Id: 0f8e4c1a-1111-4222-8333-444455556666", "Idempotent-Replayed: true",
        ])
    }

    @Test("a replay of a response whose body was too large to keep is empty and says so")
    func replayedWithTheBodyOmitted() {
        let stored = StoredResponse(status: 200, headers: HTTPHeaders([
            (name: "Content-Type", value: "application/json"), (name: "Content-Length", value: "2097152"),
        ]), body: [], omittedBodySize: 2_097_152)
        let answer = QueueAnswer.replayed(stored, operation: Self.id)
        #expect(answer.head.status == 200)
        #expect(answer.body.isEmpty)
        #expect(Array(answer.head.headers).map { "\($0.name): \($0.value)" } == [
            "Content-Type: application/json", "Content-Length: 0",
            "Outbox-Operation-Id: 0f8e4c1a-1111-4222-8333-444455556666", "Idempotent-Replayed: true",
            "Outbox-Response-Body-Omitted: true",
        ])
    }
}

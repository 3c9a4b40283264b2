import Foundation
@testable import OutboxHTTP
@testable import OutboxProxy
import Testing

@Suite("Idempotency key header: absent, one valid key, or refused")
struct IdempotencyKeyHeaderTests {
    @Test("the header's presence and value decide", arguments: [
        ([("Host", "a")], IdempotencyKeyHeader.absent),
        ([("Idempotency-Key", "pay-123")], .given("pay-123")),
        ([("idempotency-key", "pay-123")], .given("pay-123")),
        ([("Idempotency-Key", String(repeating: "k", count: 255))], .given(String(repeating: "k", count: 255))),
        ([("Idempotency-Key", String(repeating: "k", count: 256))], .invalid),
        ([("Idempotency-Key", "pay 123")], .invalid),
        ([("Idempotency-Key", "paé")], .invalid),
        ([("Idempotency-Key", "")], .invalid),
        ([("Idempotency-Key", "a"), ("Idempotency-Key", "a")], .repeated),
        ([("Idempotency-Key", "a"), ("IDEMPOTENCY-KEY", "b")], .repeated),
    ] as [([(String, String)], IdempotencyKeyHeader)])
    func checked(_ fields: [(String, String)], _ expected: IdempotencyKeyHeader) {
        let headers = HTTPHeaders(fields.map { (name: $0.0, value: $0.1) })
        #expect(IdempotencyKeyHeader(headers, name: "Idempotency-Key") == expected)
    }

    @Test("the configured header name is the one read")
    func configuredName() {
        let headers: HTTPHeaders = ["Idempotency-Key": "not-this", "X-Request-Key": "this-one"]
        #expect(IdempotencyKeyHeader(headers, name: "X-Request-Key") == .given("this-one"))
    }

    @Test("a generated key goes into a header as the UUID's lowercase text, after the fields before it")
    func generatedKeyField() {
        let uuid = UUID()
        var headers: HTTPHeaders = [("Host", "a")]
        headers.add("Idempotency-Key", uuid: uuid)
        #expect(headers.count == 2)
        #expect(headers[1].name == "Idempotency-Key")
        #expect(headers[1].value == uuid.uuidString.lowercased())
        #expect(IdempotencyKeyHeader(headers, name: "idempotency-key") == .given(uuid.uuidString.lowercased()))
    }
}

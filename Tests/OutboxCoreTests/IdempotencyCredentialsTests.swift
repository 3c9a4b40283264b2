import Foundation
import OutboxHTTP
@testable import OutboxModel
import Testing

/// The credential digest that decides who may be given a stored response for a repeated key
/// (SPEC §4): the values of `Authorization`, `Cookie` and `Proxy-Authorization`, and nothing else.
@Suite("Idempotency: credential digest")
struct IdempotencyCredentialsTests {
    @Test func noCredentialFields_IsNoDigest() {
        #expect(IdempotencyKey.credentials(in: [("Content-Type", "application/json"), ("X-User", "alice")]).isEmpty)
    }

    @Test func theDigestFollowsEachCredentialValue_AndIgnoresOtherFieldsAndNameCase() {
        let alice = IdempotencyKey.credentials(in: [("Authorization", "Bearer alice"), ("X-Trace", "1")])
        #expect(alice.count == 32)
        #expect(IdempotencyKey.credentials(in: [("authorization", "Bearer alice"), ("X-Trace", "2")]) == alice)
        let differing: [HTTPHeaders] = [
            [("Authorization", "Bearer mallory")],
            [("Authorization", "Bearer alice"), ("Cookie", "session=1")],
            [("Authorization", "Bearer alice"), ("Proxy-Authorization", "Basic eDp5")],
            [("Cookie", "Bearer alice")],
            [("Proxy-Authorization", "Bearer alice")],
            [("Authorization", "Bearer alice"), ("Authorization", "Bearer alice")],
        ]
        for headers in differing { #expect(IdempotencyKey.credentials(in: headers) != alice, "\(headers)") }
    }

    /// A record written before the digest was kept is judged by its stored headers.
    @Test func aRequestStoredWithoutADigest_IsJudgedByItsStoredHeaders() {
        let headers: HTTPHeaders = [("Authorization", "Bearer alice"), ("Host", "api")]
        let old = OperationRequest(id: UUID(), origin: Origin(scheme: .http, host: "api", port: 80), method: "POST", target: "/",
                                   headers: headers, body: [], idempotencyKey: "k", fingerprint: [], priority: .normal,
                                   tag: nil, dependsOn: nil, createdAt: 0)
        #expect(IdempotencyKey.credentials(of: old) == IdempotencyKey.credentials(in: headers))
        var stored = old
        var withProxyCredentials = headers
        withProxyCredentials.add("Proxy-Authorization", "Basic eDp5")
        stored.credentials = IdempotencyKey.credentials(in: withProxyCredentials)
        #expect(IdempotencyKey.credentials(of: stored) == stored.credentials)
    }
}

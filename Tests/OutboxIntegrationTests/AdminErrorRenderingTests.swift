import Testing

/// Admin errors are rendered like every other admin answer: pretty JSON for curl (which people
/// read in a terminal) or with `?pretty`, compact for other clients. That holds for the gate's refusals (token,
/// `Origin`, `Host`) as much as for the API's own 404 and 405.
@Suite("Admin API: error rendering", .harnessThreads)
struct AdminErrorRenderingTests {
    /// One admin request that is refused, and the status it gets.
    struct Refusal: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var status: Int
        var method = "GET"
        var path = "/admin/status"
        var host: String?
        var fields: [HeaderField] = []
    }

    static let token = "render-t0ken"
    static let authorized = HeaderField("Authorization", "Bearer \(token)")

    static let refusals: [Refusal] = [
        Refusal(testDescription: "401 without the token", status: 401),
        Refusal(testDescription: "403 cross-site Origin", status: 403,
                fields: [authorized, HeaderField("Origin", "http://evil.example")]),
        Refusal(testDescription: "403 foreign Host", status: 403, host: "rebound.example", fields: [authorized]),
        Refusal(testDescription: "404 unknown endpoint", status: 404, path: "/admin/nowhere", fields: [authorized]),
        Refusal(testDescription: "405 wrong method", status: 405, method: "DELETE", fields: [authorized]),
    ]

    @Test(arguments: refusals)
    func curlGetsThePrettyEnvelopeAndOtherClientsTheCompactOne(refusal: Refusal) async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: #"{"admin": {"token": "\#(Self.token)"}}"#)

        let forCurl = try Self.send(refusal, userAgent: "curl/8.5.0", to: outbox)
        let forScript = try Self.send(refusal, userAgent: "python-requests/2.31.0", to: outbox)
        var asked = refusal
        asked.path += "?pretty"
        let askedPretty = try Self.send(asked, userAgent: "python-requests/2.31.0", to: outbox)

        expectErrorResponse(forCurl, status: refusal.status, from: outbox)
        expectErrorResponse(forScript, status: refusal.status, from: outbox)
        #expect(forCurl.bodyText.hasPrefix("{\n  \"error\": {\n    \"code\": "), "curl got:\n\(forCurl.bodyText)")
        #expect(askedPretty.status == refusal.status && askedPretty.bodyText == forCurl.bodyText,
                "?pretty got:\n\(askedPretty)")
        #expect(nonEmptyLines(forScript.bodyText).count == 1 && forScript.bodyText.hasPrefix(#"{"error":{"code":"#),
                "a script got:\n\(forScript.bodyText)")
        // The same envelope either way: only the whitespace differs.
        #expect(forCurl.errorEnvelope?.code == forScript.errorEnvelope?.code)
        #expect(forCurl.errorEnvelope?.message == forScript.errorEnvelope?.message)
        #expect(upstream.receivedByteCount == 0, "an admin request reached the upstream")
    }

    static func send(_ refusal: Refusal, userAgent: String, to outbox: OutboxProcess) throws -> HTTPResponse {
        var head = "\(refusal.method) \(refusal.path) HTTP/1.1\r\nHost: \(refusal.host ?? "127.0.0.1:\(outbox.port)")\r\n"
            + "User-Agent: \(userAgent)\r\n"
        for field in refusal.fields { head += "\(field.name): \(field.value)\r\n" }
        return try outbox.exchange(head + "\r\n", method: refusal.method)
    }
}

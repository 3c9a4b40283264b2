/// What a `202 Accepted` from the proxy promised: the operation's id and
/// idempotency key as the headers and the JSON body state them, with the raw response kept for
/// assertions and failure messages.
struct QueuedOperation: CustomStringConvertible {
    /// `Outbox-Operation-Id` (the body's `id` is checked against it by the shape test).
    let id: String
    /// `Idempotency-Key` from the response head.
    let idempotencyKey: String
    let response: HTTPResponse
    let body: JSONObject

    /// Reads a `202`; throws with the response when the status is another or the head lacks
    /// the operation id or key, so callers that only need "it was queued" stay short.
    init(_ response: HTTPResponse) throws {
        guard response.status == 202 else {
            throw HarnessError("expected 202 Accepted, got:\n\(response)")
        }
        guard let id = response.headers["Outbox-Operation-Id"], let key = response.headers["Idempotency-Key"] else {
            throw HarnessError("202 without Outbox-Operation-Id or Idempotency-Key:\n\(response)")
        }
        self.id = id
        idempotencyKey = key
        self.response = response
        body = try JSONObject(response)
    }

    var description: String { "operation \(id) key \(idempotencyKey)" }
}

/// Reading the replay headers (`Outbox-Attempt`, the idempotency key, leaked control headers)
/// off a request the test upstream received.
extension RecordedRequest {
    /// `Outbox-Attempt` as a number, nil when missing or not a number.
    var attempt: Int? { headers["Outbox-Attempt"].flatMap { Int($0) } }

    /// `Idempotency-Key`, nil when missing.
    var idempotencyKey: String? { headers["Idempotency-Key"] }

    /// The names of every `Outbox-*` field except `Outbox-Attempt`: control headers that
    /// must never reach the upstream.
    var leakedControlHeaders: [String] {
        headers.fields.map(\.name).filter { $0.lowercased().hasPrefix("outbox-") && $0.lowercased() != "outbox-attempt" }
    }
}

/// The `Outbox-*` control headers of one request (SPEC §4), validated. They are read here and
/// never forwarded (``ForwardedHeaderKind`` drops them).
struct ControlValues: Sendable, Equatable {
    var priority = OperationPriority.normal
    var tag: String?
    /// An operation id or idempotency key, resolved by the queue.
    var dependsOn: String?
    /// `Outbox-Mode: queue`: store even when the origin is online (fire and forget).
    var queueOnly = false

    static let names = ["Outbox-Priority", "Outbox-Tag", "Outbox-Depends-On", "Outbox-Mode"]

    /// Each header at most once; an invalid value is a 400 naming the header and the value.
    static func parse(_ headers: HTTPHeaders) -> Result<ControlValues, ProxyError> {
        var values = ControlValues()
        for name in names {
            let found = headers.values(name)
            if found.isEmpty { continue }
            guard found.count == 1, let value = found.first else {
                return .failure(.badRequest("\(name) given \(found.count) times"))
            }
            switch name {
            case "Outbox-Priority":
                guard let priority = OperationPriority(headerValue: value) else {
                    return .failure(.badRequest("\(name): expected low, normal, high or critical, got \"\(value)\""))
                }
                values.priority = priority
            case "Outbox-Tag":
                guard (1...128).contains(value.utf8.count), value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                    return .failure(.badRequest("\(name): expected 1 to 128 visible ASCII characters, got \"\(value)\""))
                }
                values.tag = value
            case "Outbox-Depends-On":
                guard IdempotencyKey.isValid(value) else {
                    return .failure(.badRequest("\(name): expected an operation id or idempotency key, got \"\(value)\""))
                }
                values.dependsOn = value
            default:
                guard value.lowercased() == "queue" else {
                    return .failure(.badRequest("\(name): expected queue, got \"\(value)\""))
                }
                values.queueOnly = true
            }
        }
        return .success(values)
    }
}

/// Idempotency keys and request fingerprints (SPEC §4).
enum IdempotencyKey {
    /// 1–255 visible ASCII characters: long enough for any UUID or hash, safe in logs and JSON.
    static func isValid(_ key: String) -> Bool {
        (1...255).contains(key.utf8.count) && key.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// SHA-256 of method, target and body, NUL-separated: "the same request".
    static func fingerprint(method: String, target: String, body: [UInt8]) -> [UInt8] {
        var hash = SHA256()
        hash.update(Array(method.utf8) + [0] + Array(target.utf8) + [0])
        hash.update(body)
        return hash.finalize()
    }
}

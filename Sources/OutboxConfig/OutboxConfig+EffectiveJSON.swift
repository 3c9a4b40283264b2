import OutboxModel

extension OutboxConfig {
    /// The effective config as pretty JSON in `config.example.json`'s key order (what
    /// `check-config` prints), every key present, the extension keys `logLevel` and
    /// `limits.shutdownTimeoutSeconds` included; `parse(json: effectiveJSON()) == self` holds
    /// whenever `admin.token` is nil.
    /// A set token prints as `"[set]"` so secrets never reach a terminal or a log. No trailing
    /// newline.
    public func effectiveJSON() -> String {
        let document: [(String, JSONText)] = [
            ("listen", .string(listen.description)),
            ("upstream", upstream.map { .string($0.description) } ?? .null),
            ("dataDirectory", .string(dataDirectory)),
            ("logLevel", .string(logLevel.rawValue)),
            ("forwardProxy", .object([
                ("enabled", .bool(forwardProxy.enabled)),
                ("allowedHosts", .strings(forwardProxy.allowedHosts)),
                ("connectPorts", .integers(forwardProxy.connectPorts)),
            ])),
            ("queue", .object([
                ("methods", .strings(queue.methods)),
                ("maxBodyBytes", .integer(queue.maxBodyBytes)),
                ("maxOperations", .integer(queue.maxOperations)),
                ("ttlSeconds", .number(queue.ttlSeconds)),
                ("completedRetentionSeconds", .number(queue.completedRetentionSeconds)),
                ("unavailableStatuses", .integers(queue.unavailableStatuses)),
            ])),
            ("retry", .object([
                ("preset", .string(retry.preset.rawValue)),
                ("maxRetries", .integer(retry.maxRetries)),
                ("baseDelaySeconds", .number(retry.baseDelaySeconds)),
                ("multiplier", .number(retry.multiplier)),
                ("maxDelaySeconds", .number(retry.maxDelaySeconds)),
                ("jitter", .bool(retry.jitter)),
                ("retryableStatuses", .integers(retry.retryableStatuses)),
            ])),
            ("reachability", .object([
                ("probeIntervalSeconds", .number(reachability.probeIntervalSeconds)),
                ("probePath", reachability.probePath.map(JSONText.string) ?? .null),
                ("connectTimeoutSeconds", .number(reachability.connectTimeoutSeconds)),
                ("responseTimeoutSeconds", .number(reachability.responseTimeoutSeconds)),
            ])),
            ("idempotency", .object([
                ("header", .string(idempotency.header)),
            ])),
            ("admin", .object([
                ("pathPrefix", .string(admin.pathPrefix)),
                ("listen", admin.listen.map { .string($0.description) } ?? .null),
                ("token", admin.token == nil ? .null : .string("[set]")),
                ("redactHeaders", .strings(admin.redactHeaders)),
            ])),
            ("limits", .object([
                ("maxHeaderBytes", .integer(limits.maxHeaderBytes)),
                ("headerTimeoutSeconds", .number(limits.headerTimeoutSeconds)),
                ("idleTimeoutSeconds", .number(limits.idleTimeoutSeconds)),
                ("maxConnections", .integer(limits.maxConnections)),
                ("shutdownTimeoutSeconds", .number(limits.shutdownTimeoutSeconds)),
            ])),
        ]
        return JSONText.object(document).rendered(indent: "")
    }
}

/// The few JSON shapes `effectiveJSON` prints, with an ordered object and a layout that keeps
/// scalar arrays on one line, the way `config.example.json` writes them.
private indirect enum JSONText {
    case null
    case bool(Bool)
    case integer(Int)
    case number(Double)
    case string(String)
    case strings([String])
    case integers([Int])
    case object([(String, JSONText)])

    func rendered(indent: String) -> String {
        switch self {
        case .null: return "null"
        case .bool(let flag): return String(flag)
        case .integer(let number): return String(number)
        case .number(let number): return JSONValue.numberText(number)
        case .string(let text): return JSONValue.quoted(text)
        case .strings(let texts): return "[" + texts.map { JSONValue.quoted($0) }.joined(separator: ", ") + "]"
        case .integers(let numbers): return "[" + numbers.map(String.init).joined(separator: ", ") + "]"
        case .object(let members):
            let inner = indent + "  "
            let lines = members.map { "\(inner)\(JSONValue.quoted($0.0)): \($0.1.rendered(indent: inner))" }
            return "{\n" + lines.joined(separator: ",\n") + "\n\(indent)}"
        }
    }
}

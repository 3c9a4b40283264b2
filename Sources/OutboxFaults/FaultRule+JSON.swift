import OutboxModel

/// A rule the admin API refuses: the field at fault and what it should have been.
package struct FaultRuleError: Error, Sendable, Equatable {
    package var field: String
    package var expected: String
}

extension FaultRule {
    /// Reads a rule from the admin API's JSON; every field but `action` is optional.
    /// `makeID` names a rule that has no `id`; `randomSeed` seeds one that has no `seed`.
    package static func parse(_ document: JSON, now: Int64, makeID: () -> String,
                             randomSeed: () -> UInt64) throws(FaultRuleError) -> FaultRule {
        guard case .object(let members) = document else { throw FaultRuleError(field: "body", expected: "a JSON object") }
        let known: Set<String> = ["id", "match", "applyTo", "action", "status", "retryAfterSeconds", "body", "latencySeconds",
                                  "times", "probability", "seed", "forSeconds"]
        if let unknown = members.first(where: { !known.contains($0.key) }) {
            throw FaultRuleError(field: unknown.key, expected: "no such field; fields are " + known.sorted().joined(separator: ", "))
        }
        func string(_ key: String, in value: JSON = document, path: String = "") throws(FaultRuleError) -> String? {
            guard let member = value[key], member != .null else { return nil }
            guard let text = member.stringValue, !text.isEmpty else {
                throw FaultRuleError(field: path + key, expected: "a non-empty string")
            }
            return text
        }
        // Every number goes through CheckedNumber: finite, in range, integral where needed.
        func number(_ key: String, in range: ClosedRange<Double>) throws(FaultRuleError) -> Double? {
            guard let member = document[key], member != .null else { return nil }
            do {
                return try CheckedNumber.number(member, in: range)
            } catch {
                throw FaultRuleError(field: key, expected: error.expected)
            }
        }
        func integer(_ key: String, in range: ClosedRange<Int>) throws(FaultRuleError) -> Int? {
            guard let member = document[key], member != .null else { return nil }
            do {
                return try CheckedNumber.integer(member, in: range)
            } catch {
                throw FaultRuleError(field: key, expected: error.expected)
            }
        }

        var origin: Origin?
        var method: String?
        var pathPrefix: String?
        if let match = document["match"], match != .null {
            guard case .object(let matchMembers) = match else { throw FaultRuleError(field: "match", expected: "an object") }
            if let unknown = matchMembers.first(where: { !["origin", "method", "pathPrefix"].contains($0.key) }) {
                throw FaultRuleError(field: "match.\(unknown.key)", expected: "no such field; fields are method, origin, pathPrefix")
            }
            if let text = try string("origin", in: match, path: "match.") {
                guard let (parsed, rest) = Origin.parseAbsolute(text), rest == "/" || rest.isEmpty else {
                    throw FaultRuleError(field: "match.origin", expected: "an origin like http://127.0.0.1:9000")
                }
                origin = parsed
            }
            method = try string("method", in: match, path: "match.")
            if let prefix = try string("pathPrefix", in: match, path: "match.") {
                guard prefix.hasPrefix("/") else { throw FaultRuleError(field: "match.pathPrefix", expected: "a path starting with /") }
                pathPrefix = prefix
            }
        }
        var scope = Scope.both
        if let text = try string("applyTo") {
            guard let parsed = Scope(rawValue: text) else { throw FaultRuleError(field: "applyTo", expected: "direct, replay or both") }
            scope = parsed
        }
        let actionName = try string("action")
        let action: Action
        switch actionName {
        case "status":
            guard let status = try integer("status", in: 100...599) else {
                throw FaultRuleError(field: "status", expected: "an integer from 100 to 599 (action status needs it)")
            }
            let body = document["body"].flatMap { $0 == .null ? nil : $0 }
            if let body, body.stringValue == nil { throw FaultRuleError(field: "body", expected: "a string") }
            action = .status(status, retryAfterSeconds: try number("retryAfterSeconds", in: 0...86_400),
                             body: Array((body?.stringValue ?? "").utf8))
        case "reset": action = .reset
        case "timeout": action = .timeout
        case "offline": action = .offline
        case "latency":
            guard let seconds = try number("latencySeconds", in: 0...3600) else {
                throw FaultRuleError(field: "latencySeconds", expected: "a number from 0 to 3600 (action latency needs it)")
            }
            action = .latency(seconds: seconds)
        default:
            throw FaultRuleError(field: "action", expected: "status, reset, timeout, offline or latency")
        }
        // A field that belongs to another action is a mistake worth naming, not ignoring.
        let owned: [String: String] = ["status": "status", "retryAfterSeconds": "status", "body": "status", "latencySeconds": "latency"]
        if let stray = members.first(where: { owned[$0.key].map { $0 != action.name } ?? false && $0.value != .null }) {
            throw FaultRuleError(field: stray.key, expected: "absent: it belongs to action \(owned[stray.key] ?? "?")")
        }
        let seed = try integer("seed", in: Int.min...Int.max)
        return FaultRule(
            id: try string("id") ?? makeID(), origin: origin, method: method, pathPrefix: pathPrefix, scope: scope, action: action,
            times: try integer("times", in: 1...Int(Int32.max)), probability: try number("probability", in: 0...1) ?? 1,
            seed: seed.map { UInt64(bitPattern: Int64($0)) } ?? randomSeed(), seedGiven: seed != nil,
            forSeconds: try number("forSeconds", in: 0...(86_400 * 365)), addedAt: now)
    }

    /// The rule as the API shows it, every field present (`null` when not set), with counters.
    package func rendered(matched: Int, applied: Int, exhausted: Bool) -> JSON {
        var members: [(key: String, value: JSON)] = [
            ("id", .string(id)),
            ("match", .object([("origin", .string(origin?.description)), ("method", .string(method)),
                               ("pathPrefix", .string(pathPrefix))])),
            ("applyTo", .string(scope.rawValue)),
            ("action", .string(action.name)),
        ]
        switch action {
        case .status(let status, let retryAfter, let body):
            members += [("status", .int(status)), ("retryAfterSeconds", retryAfter.map { .double($0) } ?? .null),
                        ("body", .string(String(decoding: body, as: UTF8.self)))]
        case .latency(let seconds):
            members.append(("latencySeconds", .double(seconds)))
        case .reset, .timeout, .offline:
            break
        }
        members += [
            ("times", times.map { .int($0) } ?? .null), ("probability", .double(probability)),
            ("seed", seedGiven ? .int(Int(Int64(bitPattern: seed))) : .null),
            ("forSeconds", forSeconds.map { .double($0) } ?? .null),
            ("matched", .int(matched)), ("applied", .int(applied)), ("exhausted", .bool(exhausted)),
        ]
        return .object(members)
    }
}

import OutboxModel

/// The human-readable forms of admin answers: short summaries and aligned tables for a
/// terminal. Anything a script needs is in `--json`; these are for reading.
enum AdminRendering {
    static func status(_ document: JSON) -> String {
        var lines = ["connectivity: \(document["connectivity"]?.stringValue ?? "?")",
                     "operations: " + counts(document["counts"] ?? .null)]
        if let age = document["oldestPendingAgeSeconds"]?.doubleValue {
            lines.append("oldest pending: \(seconds(age))")
        }
        let origins = document["origins"]?.arrayValue ?? []
        if !origins.isEmpty {
            lines.append("origins:")
            let rows = origins.map { origin -> [String] in
                var row = [origin["origin"]?.stringValue ?? "?",
                           origin["online"]?.boolValue == true ? "online" : "offline",
                           "\(origin["pending"]?.intValue ?? 0) pending"]
                if let error = origin["lastError"]?.stringValue { row.append("last error: \(error)") }
                if let probe = origin["nextProbeAt"]?.stringValue { row.append("next probe \(probe)") }
                return row
            }
            lines += table(rows, header: nil).map { "  " + $0 }
        }
        var footer: [String] = []
        if let uptime = document["uptimeSeconds"]?.doubleValue { footer.append("up \(seconds(uptime))") }
        if let version = document["version"]?.stringValue { footer.append("version \(version)") }
        if !footer.isEmpty { lines.append(footer.joined(separator: ", ")) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `outbox health`'s one line: `healthy: http://127.0.0.1:8080 answered (version 0.1.0, up 3 s, 0 pending)`.
    static func health(_ status: JSON, baseURL: String) -> String {
        var facts: [String] = []
        if let version = status["version"]?.stringValue { facts.append("version \(version)") }
        if let uptime = status["uptimeSeconds"]?.doubleValue { facts.append("up \(seconds(uptime))") }
        if let pending = status["counts"]?["pending"]?.intValue { facts.append("\(pending) pending") }
        return "healthy: \(baseURL) answered" + (facts.isEmpty ? "" : " (\(facts.joined(separator: ", ")))") + "\n"
    }

    /// `pending 3, inProgress 0, …` from an object holding the five counts.
    static func counts(_ document: JSON) -> String {
        OperationStatus.allCases.map { "\($0.rawValue) \(document[$0.rawValue]?.intValue ?? 0)" }.joined(separator: ", ")
    }

    static func operations(_ document: JSON) -> String {
        let operations = document["operations"]?.arrayValue ?? []
        guard !operations.isEmpty else { return "no operations\n" }
        let keyed = operations.contains { $0["orderingKey"]?.stringValue != nil }
        var header = ["ID", "STATUS", "METHOD", "URL", "TRIES"]
        if keyed { header.append("KEY") }
        header += ["TAG", "LAST ERROR"]
        let rows = operations.map { op -> [String] in
            var row = [op["id"]?.stringValue ?? "?", op["status"]?.stringValue ?? "?", op["method"]?.stringValue ?? "?",
                       op["url"]?.stringValue ?? "?", String(op["retryCount"]?.intValue ?? 0)]
            if keyed { row.append(op["orderingKey"]?.stringValue ?? "-") }
            row += [op["tag"]?.stringValue ?? "-", op["lastError"]?.stringValue ?? "-"]
            return row
        }
        var lines = table(rows, header: header)
        if let next = document["next"]?.stringValue {
            lines.append("more after \(next): add --after \(next)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func operation(_ document: JSON) -> String {
        var lines: [String] = []
        guard case .object(let members) = document else { return document.rendered(pretty: true) + "\n" }
        for (key, value) in members {
            switch key {
            case "headers":
                lines.append("headers:")
                for pair in value.arrayValue ?? [] {
                    let parts = pair.arrayValue ?? []
                    lines.append("  \(parts.first?.stringValue ?? ""): \(parts.dropFirst().first?.stringValue ?? "")")
                }
            case "response", "conflict":
                guard value != .null else { continue }
                lines.append("\(key): HTTP \(value["status"]?.intValue ?? 0)")
                if let body = value["body"]?.stringValue, !body.isEmpty { lines.append("  " + body) }
                if let body = value["bodyBase64"]?.stringValue { lines.append("  (base64) " + body) }
                if value["bodyOmitted"]?.boolValue == true {
                    lines.append("  (body of \(value["bodySize"]?.intValue.map(String.init) ?? "?") bytes not kept: over 1 MiB)")
                }
            default:
                lines.append("\(key): \(scalar(value))")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func faults(_ document: JSON) -> String {
        let faults = document["faults"]?.arrayValue ?? []
        guard !faults.isEmpty else { return "no fault rules\n" }
        let rows = faults.map { rule -> [String] in
            [rule["id"]?.stringValue ?? "?", action(rule), match(rule), rule["applyTo"]?.stringValue ?? "both",
             String(rule["matched"]?.intValue ?? 0), String(rule["applied"]?.intValue ?? 0),
             rule["exhausted"]?.boolValue == true ? "exhausted" : "active"]
        }
        return table(rows, header: ["ID", "ACTION", "MATCH", "APPLY TO", "MATCHED", "APPLIED", "STATE"])
            .joined(separator: "\n") + "\n"
    }

    /// One rule in a line: `fault orders-down: status 503 for POST /v1/orders, 2 times`.
    static func faultLine(_ rule: JSON) -> String {
        var text = "fault \(rule["id"]?.stringValue ?? "?"): \(action(rule)) for \(match(rule))"
        if let times = rule["times"]?.intValue { text += ", \(times) time\(times == 1 ? "" : "s")" }
        if let probability = rule["probability"]?.doubleValue, probability < 1 {
            text += ", probability \(JSON.numberText(probability))"
        }
        if let seconds = rule["forSeconds"]?.doubleValue { text += ", for \(JSON.numberText(seconds)) s" }
        return text
    }

    private static func action(_ rule: JSON) -> String {
        let name = rule["action"]?.stringValue ?? "?"
        switch name {
        case "status": return "status \(rule["status"]?.intValue.map(String.init) ?? "?")"
        case "latency": return "latency \(rule["latencySeconds"]?.doubleValue.map(seconds) ?? "?")"
        default: return name
        }
    }

    private static func match(_ rule: JSON) -> String {
        let match = rule["match"] ?? .null
        let parts = [match["method"]?.stringValue, match["origin"]?.stringValue, match["pathPrefix"]?.stringValue.map { $0 + "*" }]
            .compactMap { $0 }
        return parts.isEmpty ? "every request" : parts.joined(separator: " ")
    }

    private static func scalar(_ value: JSON) -> String {
        switch value {
        case .null: "-"
        case .string(let text): text
        default: value.rendered()
        }
    }

    static func seconds(_ value: Double) -> String {
        JSON.numberText((value * 10).rounded() / 10) + " s"
    }

    /// Columns padded to their widest cell, two spaces apart; the last column is not padded.
    static func table(_ rows: [[String]], header: [String]?) -> [String] {
        let all = (header.map { [$0] } ?? []) + rows
        let columns = all.map(\.count).max() ?? 0
        var widths = [Int](repeating: 0, count: columns)
        for row in all {
            for (column, cell) in row.enumerated() { widths[column] = max(widths[column], cell.count) }
        }
        return all.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count)
            }.joined(separator: "  ")
        }
    }

    /// `outbox credentials list`: one line per origin and source, header names only.
    static func credentials(_ document: JSON) -> String {
        let entries = document["credentials"]?.arrayValue ?? []
        if entries.isEmpty { return "no credentials\n" }
        return entries.map { entry in
            let names = (entry["headers"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ")
            let expires = entry["expiresAt"]?.stringValue.map { ", expires \($0)" } ?? ""
            return "\(entry["origin"]?.stringValue ?? "?")  \(entry["source"]?.stringValue ?? "?")  \(names)\(expires)\n"
        }.joined()
    }
}

import Foundation
import Testing

/// No number crashes the process (issue 27: `POST /admin/prune?olderThanSeconds=1e300` trapped
/// on the Double→Int64 conversion and killed it with SIGILL). Every admin parameter that takes
/// a number, in the query or the JSON body, gets extreme values through the real binary: each
/// answer is the value's success or a `400` whose message starts with the parameter's name, and
/// the same process answers `/admin/status` afterwards. Config keys get the same values in the
/// core tests (`ConfigNumberTests`, every key through the parser); a few go through
/// `outbox check-config` here.
@Suite("Extreme numbers: refused by name, never a crash", .harnessThreads)
struct ExtremeNumberTests {
    /// Query values as sent (percent-encoded where needed), with the text the server decodes.
    static let queryValues: [(sent: String, means: String)] = [
        "0", "-0", "-1", "7", "1.5", "1e2", "1e-400", "1e300", "-1e300", "1e400", "NaN", "nan", "inf", "-inf", "Infinity",
        "99999999999999999999", "-99999999999999999999", "0x10", "0x1p4", "1_000", "true", "", "ten",
        String(repeating: "9", count: 3000), String(repeating: "x", count: 3000),
    ].map { ($0, $0) } + [("%2B1", "+1"), ("%201", " 1"), ("1%00", "1\u{0}"), ("%E2%88%9E", "∞")]

    /// Decoded query values a seconds parameter takes (all of them at most 3600).
    static let validSeconds: Set<String> = ["0", "-0", "7", "1.5", "1e2", "1e-400"]

    /// A query parameter that takes a number, and the decoded values it accepts.
    struct QueryParameter: Sendable {
        var method: String
        var path: String
        var name: String
        var accepts: Set<String>
    }

    static let queryParameters = [
        QueryParameter(method: "GET", path: "/admin/operations", name: "limit", accepts: ["7"]),
        QueryParameter(method: "POST", path: "/admin/prune", name: "olderThanSeconds", accepts: validSeconds),
        QueryParameter(method: "GET", path: "/admin/drain", name: "timeoutSeconds", accepts: validSeconds),
    ]

    /// JSON values, as text inserted into a body.
    static let jsonValues = [
        "0", "-0", "-1", "7", "503", "1.5", "2.0", "1e-400", "1e300", "-1e300", "1e999", "NaN", "Infinity", "-Infinity",
        "99999999999999999999", "-99999999999999999999", String(repeating: "9", count: 3000), "0x10", "1_000", "+1", ".5",
        #""7""#, #""""#, "\"" + String(repeating: "x", count: 3000) + "\"", "true", "null", "[]", "{}",
    ]

    /// A numeric member of a JSON body: the body with the value in place of `VALUE`, and the
    /// values it accepts.
    struct JSONField: Sendable {
        var method: String
        var path: String
        var name: String
        var body: String
        var accepts: Set<String>
    }

    static let jsonFields = [
        JSONField(method: "POST", path: "/admin/faults", name: "status", body: #"{"action":"status","status":VALUE}"#,
                  accepts: ["503"]),
        JSONField(method: "POST", path: "/admin/faults", name: "retryAfterSeconds",
                  body: #"{"action":"status","status":503,"retryAfterSeconds":VALUE}"#,
                  accepts: ["0", "-0", "7", "503", "1.5", "2.0", "1e-400", "null"]),
        JSONField(method: "POST", path: "/admin/faults", name: "latencySeconds", body: #"{"action":"latency","latencySeconds":VALUE}"#,
                  accepts: ["0", "-0", "7", "503", "1.5", "2.0", "1e-400"]),
        JSONField(method: "POST", path: "/admin/faults", name: "times", body: #"{"action":"reset","times":VALUE}"#,
                  accepts: ["7", "503", "2.0", "null"]),
        JSONField(method: "POST", path: "/admin/faults", name: "probability", body: #"{"action":"reset","probability":VALUE}"#,
                  accepts: ["0", "-0", "1e-400", "null"]),
        JSONField(method: "POST", path: "/admin/faults", name: "seed", body: #"{"action":"reset","seed":VALUE}"#,
                  accepts: ["0", "-0", "-1", "7", "503", "2.0", "1e-400", "null"]),
        JSONField(method: "POST", path: "/admin/faults", name: "forSeconds", body: #"{"action":"reset","forSeconds":VALUE}"#,
                  accepts: ["0", "-0", "7", "503", "1.5", "2.0", "1e-400", "null"]),
        JSONField(method: "PUT", path: "/admin/connectivity", name: "mode", body: #"{"mode":VALUE}"#, accepts: []),
    ]

    @Test func everyNumericAdminParameterRefusesExtremeValuesByNameAndTheProcessLives() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)

        for parameter in Self.queryParameters {
            for value in Self.queryValues {
                let target = "\(parameter.path)?\(parameter.name)=\(value.sent)"
                let response = try Self.ask(outbox, parameter.method, target)
                Self.expectAnswer(response, accepted: parameter.accepts.contains(value.means), naming: parameter.name,
                                  for: "\(parameter.method) \(target.prefix(80))", from: outbox)
            }
        }
        for field in Self.jsonFields {
            for value in Self.jsonValues {
                let body = field.body.replacingOccurrences(of: "VALUE", with: value)
                let response = try Self.ask(outbox, field.method, field.path, body: body)
                Self.expectAnswer(response, accepted: field.accepts.contains(value), naming: field.name,
                                  for: "\(field.method) \(field.path) \(body.prefix(80))", from: outbox)
            }
            // Rules that were added go, so the next field starts from an empty book.
            _ = try Self.ask(outbox, "DELETE", "/admin/faults")
        }
        // Last-Event-ID is a number too: one the hub never issued starts the stream afresh.
        for value in ["-1", "1e300", "99999999999999999999", "18446744073709551615", "0x10", "NaN", String(repeating: "9", count: 3000)] {
            let events = try EventStreamClient(outbox, headers: [HeaderField("Last-Event-ID", value)])
            #expect(events.status == 200, "Last-Event-ID: \(value.prefix(40)) got:\n\(events.head)\n\(outbox)")
            events.client.close()
        }

        let status = try Self.ask(outbox, "GET", "/admin/status")
        #expect(status.status == 200, "\(status)\n\(outbox)")
        #expect(outbox.child.observed.value.exit == nil, "the process ended: \(outbox)")
    }

    /// The finding itself: this request killed the process with SIGILL.
    @Test func pruneOlderThan1e300SecondsIsA400AndTheProcessLives() async throws {
        let upstream = try TestUpstream()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL)
        let pruned = try Self.ask(outbox, "POST", "/admin/prune?olderThanSeconds=1e300")
        expectErrorResponse(pruned, status: 400, from: outbox)
        #expect(pruned.errorEnvelope?.message == #"olderThanSeconds: expected a number of seconds from 0 to 1000000000, got "1e300""#,
                "\(pruned)")
        #expect(try Self.ask(outbox, "GET", "/admin/status").status == 200)
        #expect(outbox.child.observed.value.exit == nil, "the process ended: \(outbox)")
    }

    @Test func checkConfigRefusesExtremeNumbersNamingTheKey() async throws {
        let directory = try TemporaryDirectory()
        let cases: [(json: String, key: String)] = [
            (#"{"queue": {"ttlSeconds": 1e300}}"#, "queue.ttlSeconds"),
            (#"{"retry": {"maxRetries": NaN}}"#, "retry.maxRetries"),
            (#"{"queue": {"maxBodyBytes": 99999999999999999999}}"#, "queue.maxBodyBytes"),
            (#"{"forwardProxy": {"connectPorts": [0x10]}}"#, "forwardProxy.connectPorts[0]"),
            (#"{"limits": {"headerTimeoutSeconds": -Infinity}}"#, "limits.headerTimeoutSeconds"),
            (#"{"retry": {"multiplier": "2"}}"#, "retry.multiplier"),
        ]
        for (index, entry) in cases.enumerated() {
            let file = try directory.write(entry.json, to: "config\(index).json")
            let child = try OutboxProcess.launch(["check-config", "--config", file])
            _ = try await child.waitForExit(timeout: .seconds(15))
            let result = child.observed.value
            #expect(result.exit == .exited(2), "\(entry.json): \(result.stderrText)")
            let lines = nonEmptyLines(result.stderrText)
            #expect(lines.count == 1 && lines.first?.contains(".json: \(entry.key): ") == true, "\(entry.json): \(result.stderrText)")
            #expect(!looksLikeStackTrace(result.stderrText + result.stdoutText))
        }
    }

    /// Sends one admin request; a failure to get an answer (the process died) reports its stderr.
    static func ask(_ outbox: OutboxProcess, _ method: String, _ target: String, body: String = "") throws -> HTTPResponse {
        do {
            return try outbox.send(method, target, body: body,
                                   headers: body.isEmpty ? [] : [HeaderField("Content-Type", "application/json")])
        } catch {
            throw HarnessError("\(method) \(target.prefix(80)) got no answer (\(error)); \(outbox)")
        }
    }

    /// An accepted value gets a 2xx; any other value a `400` whose message names the parameter.
    static func expectAnswer(_ response: HTTPResponse, accepted: Bool, naming name: String, for request: String,
                             from outbox: OutboxProcess, sourceLocation: SourceLocation = #_sourceLocation) {
        if accepted {
            #expect((200..<300).contains(response.status), "\(request) got:\n\(response)", sourceLocation: sourceLocation)
            return
        }
        #expect(response.status == 400, "\(request) got:\n\(response)", sourceLocation: sourceLocation)
        let envelope = response.errorEnvelope
        #expect(envelope?.code == "bad_request", "\(request) got:\n\(response)", sourceLocation: sourceLocation)
        #expect(envelope?.message.hasPrefix("\(name): ") == true, "\(request) got:\n\(response)", sourceLocation: sourceLocation)
        #expect((envelope?.message.count ?? 0) < 400, "\(request): a long message\n\(response)", sourceLocation: sourceLocation)
    }
}

import OutboxConfig
import OutboxModel

/// How an admin command ended, as its process exit status. A CI job branches on these, so
/// each means one thing: drained with writes lost (3) and not drained in time (4) are apart
/// from "could not ask" (1).
package enum AdminExitStatus: Int32, Sendable {
    case done = 0
    /// The API answered an error, or could not be reached.
    case failed = 1
    case usage = 2
    /// `drain`: nothing pending or in progress, but some operations ended `failed`/`conflict`.
    case drainedWithFailures = 3
    /// `drain`: still pending or in progress when the timeout passed.
    case notDrained = 4
}

/// What a command prints and how it exits.
package struct AdminCommandResult: Sendable {
    package var status: AdminExitStatus
    /// For stdout: the summary, or the API's JSON with `--json`.
    package var output: String
    /// For stderr: one line, without the `outbox: ` prefix.
    package var problem: String?

    static func done(_ output: String) -> Self { Self(status: .done, output: output, problem: nil) }
    static func failed(_ problem: String) -> Self { Self(status: .failed, output: "", problem: problem) }
}

/// Runs one admin command: resolves the target, sends the request(s), renders the answer.
package struct AdminCommandRunner: Sendable {
    private let client: AdminHTTPClient
    private let json: Bool

    package init(client: AdminHTTPClient, json: Bool) {
        self.client = client
        self.json = json
    }

    /// Resolves where to send `invocation` and runs it; a bad address or config is exit 2.
    package static func run(_ invocation: AdminInvocation, environment: [String: String], userAgent: String) -> AdminCommandResult {
        let target: AdminTarget
        do {
            target = try AdminTarget.resolve(invocation, environment: environment)
        } catch {
            return AdminCommandResult(status: .usage, output: "", problem: error.message)
        }
        return AdminCommandRunner(client: AdminHTTPClient(target: target, userAgent: userAgent), json: invocation.json)
            .execute(invocation.command)
    }

    package func execute(_ command: AdminCommand) -> AdminCommandResult {
        do {
            switch command {
            case .status:
                let document = try ask("GET", "/status")
                return .done(json ? Self.pretty(document) : AdminRendering.status(document))
            case .health:
                return health()
            case .operations(let filter):
                let document = try ask("GET", "/operations" + Self.query(filter))
                return .done(json ? Self.pretty(document) : AdminRendering.operations(document))
            case .operation(let id):
                let document = try ask("GET", "/operations/" + PercentEncoding.component(id))
                return .done(json ? Self.pretty(document) : AdminRendering.operation(document))
            case .drain(let timeout):
                return try drain(timeoutSeconds: timeout)
            case .connectivity(let offline):
                let document = try ask("PUT", "/connectivity", json: .object([("mode", .string(offline ? "offline" : "auto"))]))
                return .done(json ? Self.pretty(document) : "connectivity: \(document["mode"]?.stringValue ?? "?")\n")
            case .retry(let id):
                let document = try ask("POST", "/operations/\(PercentEncoding.component(id))/retry")
                // The status is as of the answer: the replayer may have taken the operation already.
                return .done(json ? Self.pretty(document)
                             : "\(document["id"]?.stringValue ?? id) retried, now \(document["status"]?.stringValue ?? "?")\n")
            case .addFault(let rule):
                let document = try ask("POST", "/faults", json: rule)
                return .done(json ? Self.pretty(document) : "added " + AdminRendering.faultLine(document) + "\n")
            case .listFaults:
                let document = try ask("GET", "/faults")
                return .done(json ? Self.pretty(document) : AdminRendering.faults(document))
            case .clearFaults:
                let document = try ask("DELETE", "/faults")
                return .done(json ? Self.pretty(document) : "removed \(document["removed"]?.intValue ?? 0) fault rules\n")
            case .setCredentials(let body):
                _ = try ask("PUT", "/credentials", json: body)
                let names = body["headers"].flatMap { document -> [String]? in
                    guard case .object(let members) = document else { return nil }
                    return members.map(\.key)
                } ?? []
                return .done(json ? "{}\n" : "set \(names.joined(separator: ", ")) for \(body["origin"]?.stringValue ?? "?")\n")
            case .listCredentials:
                let document = try ask("GET", "/credentials")
                return .done(json ? Self.pretty(document) : AdminRendering.credentials(document))
            case .clearCredentials(let origin):
                _ = try ask("DELETE", "/credentials?origin=" + PercentEncoding.component(origin))
                return .done(json ? "{}\n" : "cleared the credentials set by hand for \(origin)\n")
            }
        } catch {
            return .failed(error.line)
        }
    }

    /// The connect and answer timeouts of `outbox health`. The client's answer deadline counts
    /// from the connect and adds both, so the command gives up after 1 + (1 + 3) = 5 s: inside
    /// the image's `HEALTHCHECK --timeout=10s` even on a loaded machine, where `status` (5 s to
    /// connect, 30 s to answer) would be killed by Docker instead of saying why.
    static let healthTimeouts = (connect: 1.0, answer: 3.0)

    /// `GET /status` on the listener the config names: healthy means this Outbox parsed a
    /// request and its admin API answered `200`, which a bare TCP connect (a full accept
    /// backlog still connects) does not show. One line either way, for `docker inspect`.
    private func health() -> AdminCommandResult {
        var probe = client
        probe.connectTimeoutSeconds = Self.healthTimeouts.connect
        let url = client.target.url("/status")
        let reply: AdminReply
        do {
            reply = try probe.send("GET", "/status", responseTimeoutSeconds: Self.healthTimeouts.answer)
        } catch {
            return .failed("unhealthy: \(url): \(error.reason)")
        }
        let document: JSON
        do {
            document = try Self.document(reply, method: "GET", url: url, accepting: [200])
        } catch {
            return .failed("unhealthy: \(error.line)")
        }
        return .done(json ? Self.pretty(document) : AdminRendering.health(document, baseURL: client.target.baseURL))
    }

    /// Waits on the API's drain, then lists what was lost: a CI job's last line should say
    /// which writes failed, not only that some did.
    private func drain(timeoutSeconds: Double) throws(AdminRequestFailure) -> AdminCommandResult {
        let path = "/drain?timeoutSeconds=" + JSON.numberText(timeoutSeconds)
        let reply = try send("GET", path, responseTimeoutSeconds: timeoutSeconds)
        let document = try Self.document(reply, method: "GET", url: client.target.url(path), accepting: [200, 504])
        if reply.status == 504 {
            return AdminCommandResult(status: .notDrained, output: json ? Self.pretty(document) : "",
                                      problem: "not drained after \(JSON.numberText(timeoutSeconds)) s: "
                                          + AdminRendering.counts(document))
        }
        let lostCount = (document["failed"]?.intValue ?? 0) + (document["conflict"]?.intValue ?? 0)
        guard lostCount > 0 else {
            return .done(json ? Self.pretty(document) : "drained: \(AdminRendering.counts(document))\n")
        }
        var lost: [JSON] = []
        for status in ["failed", "conflict"] where (document[status]?.intValue ?? 0) > 0 {
            let page = try ask("GET", "/operations?status=\(status)&limit=1000")
            lost += page["operations"]?.arrayValue ?? []
        }
        if json {
            guard case .object(var members) = document else { return .failed("drain: answer is not an object") }
            members.append(("lost", .array(lost)))
            return AdminCommandResult(status: .drainedWithFailures, output: Self.pretty(.object(members)), problem: nil)
        }
        let listing = AdminRendering.operations(.object([("operations", .array(lost)), ("next", .null)]))
        return AdminCommandResult(status: .drainedWithFailures,
                                  output: "drained: \(AdminRendering.counts(document))\n" + listing,
                                  problem: "drained, but \(lostCount) operation\(lostCount == 1 ? "" : "s") ended failed or conflict")
    }

    private func ask(_ method: String, _ path: String, json body: JSON? = nil) throws(AdminRequestFailure) -> JSON {
        let reply = try send(method, path, json: body)
        return try Self.document(reply, method: method, url: client.target.url(path), accepting: 200..<300)
    }

    private func send(_ method: String, _ path: String, json body: JSON? = nil,
                      responseTimeoutSeconds: Double = 0) throws(AdminRequestFailure) -> AdminReply {
        do {
            return try client.send(method, path, json: body, responseTimeoutSeconds: responseTimeoutSeconds + 30)
        } catch {
            throw AdminRequestFailure(line: "\(client.target.url(path)): \(error.reason)")
        }
    }

    /// The answer's JSON when its status is accepted; else the API's error, in one line. A
    /// `204` has no body and reads as an empty object.
    private static func document(_ reply: AdminReply, method: String, url: String,
                                 accepting accepted: some Collection<Int>) throws(AdminRequestFailure) -> JSON {
        let parsed: JSON? = reply.body.isEmpty ? .object([]) : (try? JSONReader.parse(reply.body))
        guard accepted.contains(reply.status) else {
            let error = parsed?["error"]
            let detail = [error?["code"]?.stringValue, error?["message"]?.stringValue].compactMap { $0 }.joined(separator: ": ")
            throw AdminRequestFailure(line: "\(method) \(url): HTTP \(reply.status)" + (detail.isEmpty ? "" : " \(detail)"))
        }
        guard let parsed else { throw AdminRequestFailure(line: "\(method) \(url): the answer is not JSON") }
        return parsed
    }

    private static func query(_ filter: AdminCommand.OperationsFilter) -> String {
        let pairs: [(String, String?)] = [
            ("status", filter.status?.rawValue), ("tag", filter.tag), ("origin", filter.origin),
            ("orderingKey", filter.orderingKey), ("limit", filter.limit.map(String.init)), ("after", filter.after),
        ]
        let given = pairs.compactMap { name, value in value.map { "\(name)=\(PercentEncoding.component($0))" } }
        return given.isEmpty ? "" : "?" + given.joined(separator: "&")
    }

    private static func pretty(_ document: JSON) -> String {
        document.rendered(pretty: true) + "\n"
    }
}

/// A request that got no usable answer: the one line to print.
struct AdminRequestFailure: Error {
    var line: String
}

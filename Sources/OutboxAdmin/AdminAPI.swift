import Foundation
import OutboxFaults
import OutboxHTTP
import OutboxModel
import OutboxQueue
import OutboxTelemetry

/// The admin API as one route table and one table of errors (`AdminError`), so every endpoint
/// answers errors and wrong methods the same way: handlers throw a case, `handle` turns it into
/// the error envelope in one place.
package struct AdminAPI: Sendable {
    let queue: AdminQueueSource
    let redactHeaders: Set<String>
    let version: String
    let startedAt: Int64
    let metrics: Metrics
    /// `admin.pathPrefix`, for the links of the dashboard page.
    package let prefix: String
    /// Members that `/status` ends with, fixed at start by the layers that know them
    /// (`tlsVerify`, `interception`).
    let statusSettings: [(key: String, value: JSON)]
    /// The dashboard with `prefix` filled in: the prefix never changes while the process runs,
    /// so the page is built once here rather than on every request.
    let dashboardPage: String
    /// The fault rules `/faults` shows and edits.
    let faults: FaultBook

    package typealias Response = AdminResponse

    package init(queue: AdminQueueSource, redactHeaders: Set<String>, version: String, startedAt: Int64, metrics: Metrics,
                 prefix: String, faults: FaultBook = FaultBook(), statusSettings: [(key: String, value: JSON)] = []) {
        self.faults = faults
        self.queue = queue
        self.statusSettings = statusSettings
        self.redactHeaders = redactHeaders
        self.version = version
        self.startedAt = startedAt
        self.metrics = metrics
        self.prefix = prefix
        dashboardPage = DashboardPage.html(prefix: prefix)
    }

    /// The route table: path → endpoint; each endpoint checks its own methods.
    private enum Endpoint {
        case dashboard, status, operations, operation(String), retry(String), prune, flush, connectivity, drain, metrics
        case faults, fault(String), events

        init?(_ parts: [Substring]) {
            switch (parts.count, parts.first) {
            case (0, _): self = .dashboard
            case (1, "status"): self = .status
            case (1, "operations"): self = .operations
            case (2, "operations"): self = .operation(String(parts[1]))
            case (3, "operations") where parts[2] == "retry": self = .retry(String(parts[1]))
            case (1, "prune"): self = .prune
            case (1, "flush"): self = .flush
            case (1, "connectivity"): self = .connectivity
            case (1, "drain"): self = .drain
            case (1, "metrics"): self = .metrics
            case (1, "faults"): self = .faults
            case (1, "events"): self = .events
            case (2, "faults"): self = .fault(String(parts[1]))
            default: return nil
            }
        }

        /// The methods each endpoint takes, for dispatch and `Allow`.
        var methods: [String] {
            switch self {
            case .dashboard, .status, .drain, .metrics: ["GET", "HEAD"]
            case .events: ["GET"]
            case .operations, .operation: ["GET", "HEAD", "DELETE"]
            case .retry, .prune, .flush: ["POST"]
            case .connectivity: ["GET", "HEAD", "PUT"]
            case .faults: ["GET", "HEAD", "POST", "DELETE"]
            case .fault: ["GET", "HEAD", "DELETE"]
            }
        }
    }

    /// The answer to one admin request (already past `AdminGate`); a failure is the envelope
    /// of its `AdminError`, never a thrown error, so the proxy has one thing to render.
    package func handle(_ request: AdminRequest) async -> Response {
        do {
            return try await answer(request)
        } catch {
            return error.response
        }
    }

    private func answer(_ request: AdminRequest) async throws(AdminError) -> Response {
        guard let endpoint = Endpoint(request.path.split(separator: "/", omittingEmptySubsequences: true)) else {
            throw .noEndpoint(method: request.method, path: request.path)
        }
        guard endpoint.methods.contains(request.method) else { throw .methodNotAllowed(allow: endpoint.methods) }
        let reading = request.method == "GET" || request.method == "HEAD"
        switch endpoint {
        case .dashboard:
            // For browsers: one self-contained page; no other site may frame its buttons.
            return Response(status: 200, body: .null,
                            extraHeaders: [("Content-Security-Policy", "frame-ancestors 'none'")],
                            raw: ("text/html; charset=utf-8", dashboardPage))
        case .status:
            return Response(status: 200, body: status())
        case .events:
            var response = Response(status: 200, body: .null)
            response.streamsEvents = true
            return response
        case .operations where reading:
            return try listOperations(request.query)
        case .operations:
            let status = try Self.statusFilter(request.query)
            let removed = await queue.deleteAll(status: status)
            return Response(status: 200, body: .object([("removed", .int(removed))]))
        case .operation(let id):
            // An id that is not a UUID names no operation: the same 404 as an unknown one.
            guard let uuid = UUID(uuidString: id) else { throw .noOperation(id) }
            if !reading {
                guard await queue.delete(uuid) else { throw .noOperation(id) }
                return Response(status: 204, body: .null)
            }
            guard let (snapshot, stored) = queue.detail(uuid) else { throw .noOperation(id) }
            return Response(status: 200, body: detail(snapshot, stored))
        case .retry(let id):
            guard let uuid = UUID(uuidString: id) else { throw .noOperation(id) }
            switch await queue.retry(uuid) {
            case .success(let snapshot):
                return Response(status: 200, body: summary(snapshot))
            case .failure(.notFound):
                throw .noOperation(id)
            case .failure(.notRetryable(let status)):
                throw .notRetryable(id: id, status: status)
            }
        case .prune:
            guard let text = request.query["olderThanSeconds"], let seconds = Double(text), seconds >= 0, seconds.isFinite else {
                throw .invalid(field: "olderThanSeconds", expected: "a number of seconds ≥ 0")
            }
            let removed = await queue.prune(createdBefore: WallClock.millis() - Int64(seconds * 1000))
            return Response(status: 200, body: .object([("removed", .int(removed))]))
        case .flush:
            await queue.flush()
            return Response(status: 202, body: .object([("flushed", .bool(true))]))
        case .metrics:
            let origins = queue.origins
            let text = metrics.render(counts: queue.counts, origins: origins,
                                      activeLanes: origins.map { ($0.origin, queue.activeLanes(origin: $0.origin)) },
                                      oldestPendingAgeSeconds: queue.oldestPendingAgeSeconds, storageBytes: queue.storageBytes)
            return Response(status: 200, body: .null, raw: ("text/plain; version=0.0.4; charset=utf-8", text))
        case .faults where reading:
            return Response(status: 200, body: .object([("faults", .array(faults.rendered()))]))
        case .faults where request.method == "POST":
            return try addFault(request.body)
        case .faults:
            return Response(status: 200, body: .object([("removed", .int(faults.removeAll()))]))
        case .fault(let id) where reading:
            guard let rule = faults.rendered(id) else { throw .noFault(id) }
            return Response(status: 200, body: rule)
        case .fault(let id):
            guard faults.remove(id) else { throw .noFault(id) }
            return Response(status: 204, body: .null)
        case .connectivity where reading:
            return Response(status: 200, body: .object([("mode", .string(queue.connectivityMode))]))
        case .connectivity:
            guard let document = try? JSONReader.parse(request.body), case .object(let members) = document,
                  case .string(let mode)? = members.first(where: { $0.key == "mode" })?.value else {
                throw .invalid(field: "body", expected: #"{"mode":"offline"} or {"mode":"auto"}"#)
            }
            guard mode == "offline" || mode == "auto" else {
                throw .invalid(field: "mode", expected: "offline or auto", got: mode)
            }
            queue.setForcedOffline(mode == "offline")
            return Response(status: 200, body: .object([("mode", .string(mode))]))
        case .drain:
            let timeout = Double(request.query["timeoutSeconds"] ?? "30")
            guard let timeout, timeout >= 0, timeout <= 3600 else {
                throw .invalid(field: "timeoutSeconds", expected: "a number of seconds from 0 to 3600")
            }
            let drained = await queue.waitUntilDrained(timeoutSeconds: timeout)
            return Response(status: drained ? 200 : 504, body: .object([("drained", .bool(drained))] + countMembers()))
        }
    }

    private func addFault(_ body: [UInt8]) throws(AdminError) -> Response {
        let document: JSON
        do {
            document = try JSONReader.parse(body)
        } catch {
            throw .invalid(field: "body", expected: "a JSON fault rule (\(error))")
        }
        let rule: FaultRule
        do {
            rule = try FaultRule.parse(document, now: WallClock.millis(), makeID: { UUID().lowercasedText },
                                       randomSeed: { UInt64.random(in: .min ... .max) })
        } catch {
            throw .invalid(field: error.field, expected: error.expected)
        }
        guard faults.add(rule) else { throw .faultExists(rule.id) }
        return Response(status: 201, body: faults.rendered(rule.id) ?? .null)
    }

    private func status() -> JSON {
        let now = WallClock.millis()
        return .object([
            ("connectivity", .string(queue.connectivityMode)),
            ("origins", .array(queue.origins.map { origin in
                .object([
                    ("origin", .string(origin.origin.description)), ("online", .bool(origin.online)),
                    ("pending", .int(queue.unfinishedCount(origin: origin.origin))),
                    ("lastError", .string(origin.lastError)),
                    ("nextProbeAt", origin.nextProbeAt.map { .string(WallClock.iso8601(millis: $0)) } ?? .null),
                ])
            })),
            ("counts", .object(countMembers())),
            ("storage", .object([("damagedRecords", .int(queue.storageDamagedRecords))])),
            ("oldestPendingAgeSeconds", queue.oldestPendingAgeSeconds.map { .double(($0 * 1000).rounded() / 1000) } ?? .null),
            ("uptimeSeconds", .double(Double(now - startedAt) / 1000)),
            ("version", .string(version)),
        ] + statusSettings)
    }

    private func countMembers() -> [(String, JSON)] {
        let counts = queue.counts
        return OperationStatus.allCases.map { ($0.rawValue, .int(counts[$0] ?? 0)) }
    }

    /// The `status=` filter that listing and bulk delete share: nil when absent or empty (every
    /// status), else one `OperationStatus` by its exact name.
    static func statusFilter(_ query: [String: String]) throws(AdminError) -> OperationStatus? {
        guard let text = query["status"], !text.isEmpty else { return nil }
        guard let status = OperationStatus(rawValue: text) else {
            throw .invalid(field: "status", expected: "one of " + OperationStatus.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return status
    }

    private func listOperations(_ query: [String: String]) throws(AdminError) -> Response {
        let status = try Self.statusFilter(query)
        let limit = Int(query["limit"] ?? "100") ?? -1
        guard (1...1000).contains(limit) else { throw .invalid(field: "limit", expected: "an integer from 1 to 1000") }
        var after: UUID?
        if let text = query["after"], !text.isEmpty {
            guard let cursor = UUID(uuidString: text) else { throw .invalid(field: "after", expected: "an operation id") }
            after = cursor
        }
        let page = queue.list(status: status, tag: query["tag"], origin: query["origin"], orderingKey: query["orderingKey"],
                              after: after, limit: limit)
        return Response(status: 200, body: .object([
            ("operations", .array(page.items.map { summary($0) })),
            ("next", page.next.map { .string($0.lowercasedText) } ?? .null),
        ]))
    }

    private func summary(_ op: OperationSnapshot) -> JSON {
        .object(commonMembers(op))
    }

    private func commonMembers(_ op: OperationSnapshot) -> [(String, JSON)] {
        [
            ("id", .string(op.id.lowercasedText)), ("method", .string(op.method)),
            ("url", .string(op.origin.description + op.target)), ("origin", .string(op.origin.description)),
            ("idempotencyKey", .string(op.idempotencyKey)), ("status", .string(op.state.status.rawValue)),
            ("priority", .string(op.priority.name)), ("tag", .string(op.tag)),
            ("orderingKey", .string(op.orderingKey)),
            ("dependsOn", op.dependsOn.map { .string($0.lowercasedText) } ?? .null),
            ("createdAt", .string(WallClock.iso8601(millis: op.createdAt))),
            ("lastAttemptAt", op.state.lastAttemptAt.map { .string(WallClock.iso8601(millis: $0)) } ?? .null),
            ("retryCount", .int(op.state.retryCount)), ("maxRetries", .int(queue.maxRetries)),
            ("nextAttemptAt", Self.shownNextAttempt(op.state.nextAttemptAt, now: WallClock.millis())
                .map { .string(WallClock.iso8601(millis: $0)) } ?? .null),
            ("lastError", .string(op.state.lastError)),
        ]
    }

    /// When a waiting operation will be tried, as shown: its schedule, or `now` once that has
    /// passed. A schedule passes unused while the origin is offline or the process is down; the
    /// operation is then due (the replayer takes it as soon as the lane and the origin allow),
    /// and a time in the past would read as a replayer that fell behind.
    static func shownNextAttempt(_ scheduled: Int64?, now: Int64) -> Int64? {
        scheduled.map { max($0, now) }
    }

    private func detail(_ op: OperationSnapshot, _ stored: OperationRequest) -> JSON {
        var members = commonMembers(op)
        members.insert(("headers", headers(stored.headers)), at: 5)
        members.insert(body(stored.body), at: 6)
        members.append(("response", op.state.response.map { responseDocument($0) } ?? .null))
        members.append(("conflict", op.state.conflict.map { responseDocument($0) } ?? .null))
        return .object(members)
    }

    /// `[name, value]` pairs in order; `redactHeaders` shown as "[redacted]". The stored
    /// request keeps the real values for replay.
    private func headers(_ headers: HTTPHeaders) -> JSON {
        .array(headers.map { field in
            .array([.string(field.name), .string(redactHeaders.contains(field.name.lowercased()) ? "[redacted]" : field.value)])
        })
    }

    private func body(_ bytes: [UInt8]) -> (String, JSON) {
        if let text = String(validating: bytes, as: UTF8.self) { return ("body", .string(text)) }
        return ("bodyBase64", .string(Data(bytes).base64EncodedString()))
    }

    private func responseDocument(_ response: StoredResponse) -> JSON {
        let (key, value) = body(response.body)
        return .object([("status", .int(response.status)), ("headers", headers(response.headers)), (key, value)])
    }
}

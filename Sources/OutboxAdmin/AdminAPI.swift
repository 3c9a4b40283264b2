import Foundation
import OutboxCredentials
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
    /// Replay credentials `/credentials` sets, lists and clears (SPEC §10).
    let credentials: CredentialBook

    package typealias Response = AdminResponse

    package init(queue: AdminQueueSource, redactHeaders: Set<String>, version: String, startedAt: Int64, metrics: Metrics,
                 prefix: String, faults: FaultBook = FaultBook(), statusSettings: [(key: String, value: JSON)] = [],
                 credentials: CredentialBook = CredentialBook(rules: [], directory: nil, logger: Logger(level: .error))) {
        self.credentials = credentials
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

    /// An admin request's endpoint: its route and the id the route's path carries.
    private enum Endpoint {
        case dashboard, status, operations, operation(String), retry(String), prune, flush, connectivity, drain, metrics
        case faults, fault(String), events, credentials

        init?(_ parts: [Substring]) {
            guard let (route, id) = AdminRoute.match(parts) else { return nil }
            switch route {
            case .dashboard: self = .dashboard
            case .status: self = .status
            case .operations: self = .operations
            case .operation: self = .operation(id)
            case .retry: self = .retry(id)
            case .prune: self = .prune
            case .flush: self = .flush
            case .connectivity: self = .connectivity
            case .drain: self = .drain
            case .metrics: self = .metrics
            case .faults: self = .faults
            case .fault: self = .fault(id)
            case .events: self = .events
            case .credentials: self = .credentials
            }
        }

        /// Back to the table, for the methods (both switches are exhaustive: a route added to
        /// `AdminRoute` must be given an endpoint here, and the reverse).
        var route: AdminRoute {
            switch self {
            case .dashboard: .dashboard
            case .status: .status
            case .operations: .operations
            case .operation: .operation
            case .retry: .retry
            case .prune: .prune
            case .flush: .flush
            case .connectivity: .connectivity
            case .drain: .drain
            case .metrics: .metrics
            case .faults: .faults
            case .fault: .fault
            case .events: .events
            case .credentials: .credentials
            }
        }

        var methods: [String] { route.methods }
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
        case .operations, .operation, .retry, .prune, .flush:
            // What is stored cannot be shown or changed while the store is away.
            if let reason = queue.unavailable { throw .storeUnavailable(reason) }
        default:
            break
        }
        switch endpoint {
        case .dashboard:
            // For browsers: one self-contained page; no other site may frame its buttons.
            return Response(status: 200, body: .null,
                            extraHeaders: [("Content-Security-Policy", "frame-ancestors 'none'")],
                            raw: ("text/html; charset=utf-8", dashboardPage))
        case .status:
            return Response(status: 200, body: await status())
        case .events:
            var response = Response(status: 200, body: .null)
            response.streamsEvents = true
            return response
        case .operations where reading:
            return try await listOperations(request.query)
        case .operations:
            let status = try Self.statusFilter(request.query)
            let removed = await queue.deleteAll(status: status)
            return Response(status: 200, body: .object([("removed", .int(removed))]))
        case .operation(let id):
            // An id that is not a UUID names no operation: the same 404 as an unknown one.
            guard let uuid = UUID(uuidString: id) else { throw .noOperation(id) }
            if !reading {
                guard await queue.delete(uuid) else { throw queue.unavailable.map { .storeUnavailable($0) } ?? .noOperation(id) }
                return Response(status: 204, body: .null)
            }
            // The first pass over the body, while the queue checks its record piece by piece:
            // text or base64, and how long. The view then streams it (SPEC §6).
            var scan = BodyJSONForm.Scan()
            guard let view = await queue.view(uuid, visitingBody: { scan.add($0) }) else {
                // A read that failed because the store went away is not "no such operation".
                throw queue.unavailable.map { .storeUnavailable($0) } ?? .noOperation(id)
            }
            return Response(status: 200, streamed: detail(view, bodyForm: scan.form, pretty: request.pretty))
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
            guard let seconds = try Self.seconds(request.query, "olderThanSeconds") else {
                throw .invalid(field: "olderThanSeconds", expected: CheckedNumber.describe(0...CheckedNumber.maxSeconds, unit: "seconds"))
            }
            let removed = await queue.prune(createdBefore: WallClock.millis() - WallClock.milliseconds(seconds))
            return Response(status: 200, body: .object([("removed", .int(removed))]))
        case .flush:
            await queue.flush()
            return Response(status: 202, body: .object([("flushed", .bool(true))]))
        case .metrics:
            let origins = queue.origins
            var activeLanes: [(Origin, Int)] = []
            for origin in origins { activeLanes.append((origin.origin, await queue.activeLanes(origin: origin.origin))) }
            let text = metrics.render(counts: await queue.counts, origins: origins, activeLanes: activeLanes,
                                      oldestPendingAgeSeconds: await queue.oldestPendingAgeSeconds,
                                      storageBytes: await queue.storageBytes)
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
        case .credentials where reading:
            return Response(status: 200, body: .object([("credentials", .array(credentials.list().map { listing in
                .object([("origin", .string(listing.origin.description)),
                         ("headers", .array(listing.headers.map { .string($0) })),
                         ("source", .string(listing.source)),
                         ("expiresAt", listing.expiresAt.map { .string(WallClock.iso8601(millis: $0)) } ?? .null)])
            }))]))
        case .credentials where request.method == "PUT":
            let (origin, headers) = try Self.credentialsBody(request.body)
            credentials.set(headers, for: origin)
            return Response(status: 204, body: .null)
        case .credentials:
            guard let text = request.query["origin"], let origin = Self.origin(text) else {
                throw .invalid(field: "origin", expected: "an origin URL (scheme://host[:port])")
            }
            credentials.clear(origin)
            return Response(status: 204, body: .null)
        case .connectivity where reading:
            return Response(status: 200, body: .object([("mode", .string(queue.connectivityMode))]))
        case .connectivity:
            let expected = #"{"mode":"offline"} or {"mode":"auto"}"#
            guard case .object(let members) = try Self.document(request.body, expected: expected),
                  let value = members.first(where: { $0.key == "mode" })?.value else {
                throw .invalid(field: "body", expected: expected)
            }
            // A number or anything else where the mode belongs is the mode's fault, not the body's.
            guard case .string(let mode) = value, mode == "offline" || mode == "auto" else {
                throw .invalid(field: "mode", expected: "offline or auto", got: NumberError.shortened(value.stringValue ?? value.rendered()))
            }
            queue.setForcedOffline(mode == "offline")
            return Response(status: 200, body: .object([("mode", .string(mode))]))
        case .drain:
            let timeout = try Self.seconds(request.query, "timeoutSeconds", atMost: 3600) ?? 30
            let drained = await queue.waitUntilDrained(timeoutSeconds: timeout)
            return Response(status: drained ? 200 : 504, body: .object([("drained", .bool(drained))] + (await countMembers())))
        }
    }

    /// `PUT /admin/credentials`'s body: `{"origin": URL, "headers": {"Name": "value", …}}`. The
    /// values are never echoed in an error.
    static func credentialsBody(_ body: [UInt8]) throws(AdminError) -> (Origin, [(name: String, value: String)]) {
        let expected = #"{"origin": "https://host", "headers": {"Name": "value"}}"#
        let document = try Self.document(body, expected: expected)
        guard case .object = document else { throw .invalid(field: "body", expected: expected) }
        guard let text = document["origin"]?.stringValue, let origin = Self.origin(text) else {
            throw .invalid(field: "origin", expected: "an origin URL (scheme://host[:port])")
        }
        guard case .object(let members)? = document["headers"], !members.isEmpty else {
            throw .invalid(field: "headers", expected: "an object of header names and string values")
        }
        var headers: [(name: String, value: String)] = []
        for (name, value) in members {
            guard !name.isEmpty, name.utf8.allSatisfy({ HTTPByte.isTokenChar($0) }) else {
                throw .invalid(field: "headers", expected: "header names as tokens", got: NumberError.shortened(name))
            }
            guard let text = value.stringValue, !text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                throw .invalid(field: "headers.\(name)", expected: "a string without line breaks")
            }
            headers.append((name.lowercased(), text))
        }
        return (origin, headers)
    }

    /// An origin URL (`https://api.example.com`, `http://10.0.0.5:8080`): scheme, host, port.
    static func origin(_ text: String) -> Origin? {
        guard text.contains("://"), let (origin, target) = Origin.parseAbsolute(text.hasSuffix("/") ? text : text + "/"),
              target == "/" else { return nil }
        return origin
    }

    private func addFault(_ body: [UInt8]) throws(AdminError) -> Response {
        let document = try Self.document(body, expected: "a JSON fault rule")
        let rule: FaultRule
        do {
            rule = try FaultRule.parse(document, now: WallClock.millis(), makeID: { UUID().lowercasedText },
                                       randomSeed: { UInt64.random(in: .min ... .max) })
        } catch {
            throw .invalid(field: error.field, expected: error.expected)
        }
        switch faults.add(rule) {
        case .added: break
        case .idTaken: throw .faultExists(rule.id)
        case .full: throw .faultLimit(FaultBook.maxRules)
        }
        return Response(status: 201, body: faults.rendered(rule.id) ?? .null)
    }

    /// A request body as JSON; a `400` naming `body`, or the member whose value is no number
    /// the reader takes (`"times": NaN`, `"times": 99999999999999999999`), when it is not.
    static func document(_ body: [UInt8], expected: String) throws(AdminError) -> JSON {
        do {
            return try JSONReader.parse(body)
        } catch {
            guard let path = error.path else { throw .invalid(field: "body", expected: "\(expected) (\(error))") }
            throw .invalid(field: path, expected: "a JSON number in range (\(error))")
        }
    }

    private func status() async -> JSON {
        var origins: [JSON] = []
        for origin in queue.origins {
            origins.append(.object([
                ("origin", .string(origin.origin.description)), ("online", .bool(origin.online)),
                ("pending", .int(await queue.unfinishedCount(origin: origin.origin))),
                ("lastError", .string(origin.lastError)),
                ("nextProbeAt", origin.nextProbeAt.map { .string(WallClock.iso8601(millis: $0)) } ?? .null),
                ("authRequired", .bool(origin.authRequired)),
            ]))
        }
        let store = await queue.store
        let counts = await countMembers()
        let damaged = await queue.storageDamagedRecords
        let oldest = await queue.oldestPendingAgeSeconds
        let now = WallClock.millis()
        return .object([
            ("connectivity", .string(queue.connectivityMode)),
            ("origins", .array(origins)),
            ("counts", .object(counts)),
            ("storage", .object([("damagedRecords", .int(damaged))])),
            ("store", .object([
                ("kind", .string(store.kind)), ("reachable", .bool(store.reachable)), ("lastError", .string(store.lastError)),
                ("instance", .string(store.instance)),
            ])),
            ("oldestPendingAgeSeconds", oldest.map { .double(($0 * 1000).rounded() / 1000) } ?? .null),
            ("uptimeSeconds", .double(Double(now - startedAt) / 1000)),
            ("version", .string(version)),
        ] + statusSettings)
    }

    private func countMembers() async -> [(String, JSON)] {
        let counts = await queue.counts
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

    /// The query parameter `name` as an integer in `range` (`CheckedNumber`'s rules); nil when
    /// absent, a `400` naming it when it is anything but such an integer (empty included).
    static func integer(_ query: [String: String], _ name: String, in range: ClosedRange<Int>) throws(AdminError) -> Int? {
        guard let text = query[name] else { return nil }
        do {
            return try CheckedNumber.integer(text, in: range)
        } catch {
            throw .invalid(field: name, expected: error.expected, got: error.found)
        }
    }

    /// The query parameter `name` as seconds from 0 to `maximum`; nil when absent, a `400`
    /// naming it otherwise (NaN, `inf`, `1e300`, `-1`, `0x10` and empty included).
    static func seconds(_ query: [String: String], _ name: String,
                        atMost maximum: Double = CheckedNumber.maxSeconds) throws(AdminError) -> Double? {
        guard let text = query[name] else { return nil }
        do {
            return try CheckedNumber.seconds(text, atMost: maximum)
        } catch {
            throw .invalid(field: name, expected: error.expected, got: error.found)
        }
    }

    private func listOperations(_ query: [String: String]) async throws(AdminError) -> Response {
        let status = try Self.statusFilter(query)
        let limit = try Self.integer(query, "limit", in: 1...1000) ?? 100
        var after: UUID?
        if let text = query["after"], !text.isEmpty {
            guard let cursor = UUID(uuidString: text) else { throw .invalid(field: "after", expected: "an operation id") }
            after = cursor
        }
        let page = await queue.list(status: status, tag: query["tag"], origin: query["origin"], orderingKey: query["orderingKey"],
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
            ("instance", .string(op.instance)),
        ]
    }

    /// When a waiting operation will be tried, as shown: its schedule, or `now` once that has
    /// passed. A schedule passes unused while the origin is offline or the process is down; the
    /// operation is then due (the replayer takes it as soon as the lane and the origin allow),
    /// and a time in the past would read as a replayer that fell behind.
    static func shownNextAttempt(_ scheduled: Int64?, now: Int64) -> Int64? {
        scheduled.map { max($0, now) }
    }

    /// The view of one operation, its bodies written piece by piece: the request's from the log
    /// (in `bodyForm`), the response's and conflict's (at most 1 MiB each) from memory.
    private func detail(_ view: OperationView, bodyForm: BodyJSONForm, pretty: Bool) -> StreamedJSON {
        let op = view.snapshot
        var texts: [String: StreamedJSON.Text] = [:]
        func streamed(_ source: any ByteSource, _ form: BodyJSONForm) -> (String, JSON) {
            let placeholder = StreamedJSON.placeholder(texts.count)
            texts[placeholder] = StreamedJSON.Text(source: source, form: form)
            return (form.key, .string(placeholder))
        }
        func responseDocument(_ response: StoredResponse) -> JSON {
            var members: [(String, JSON)] = [("status", .int(response.status)), ("headers", headers(response.headers))]
            if let size = response.omittedBodySize {
                // Too large to keep (over 1 MiB): said so, never shown cut.
                members += [("bodyOmitted", .bool(true)), ("bodySize", .int(size))]
            } else {
                members.append(streamed(response.body, BodyJSONForm(of: response.body)))
            }
            return .object(members)
        }
        var members = commonMembers(op)
        members.insert(("headers", headers(view.headers)), at: 5)
        members.insert(streamed(view.body, bodyForm), at: 6)
        members.append(("response", op.state.response.map(responseDocument) ?? .null))
        members.append(("conflict", op.state.conflict.map(responseDocument) ?? .null))
        return StreamedJSON(.object(members), pretty: pretty, trailer: "\n", texts: texts)
    }

    /// `[name, value]` pairs in order; `redactHeaders` shown as "[redacted]". The stored
    /// request keeps the real values for replay.
    private func headers(_ headers: HTTPHeaders) -> JSON {
        .array(headers.map { field in
            .array([.string(field.name), .string(redactHeaders.contains(field.name.lowercased()) ? "[redacted]" : field.value)])
        })
    }
}

import Foundation
@testable import OutboxHTTP
@testable import OutboxModel
@testable import OutboxProxy
@testable import OutboxQueue
import Testing

/// The queue's rules, one row per rule: what the proxy does with a request given what it says
/// and what the queue knows. The rows are the product's behaviour as the integration suites
/// (Queue*Tests) observe it through sockets; here each rule, and which rule wins, is pinned alone.
@Suite("Queue decision: forward, store, replay, accept or refuse")
struct QueueDecisionTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var rule: String
        var request: QueueDecision.Request
        var expected: QueueDecision
        var testDescription: String { rule }
    }

    struct HeadRow: Sendable, CustomTestStringConvertible {
        var rule: String
        var control: Result<ControlHeaders, ControlHeaderError>
        var method: QueueDecision.Method
        var expected: QueueDecision
        var testDescription: String { rule }
    }

    static let sameFingerprint = [UInt8](repeating: 0xA1, count: 32)
    static let otherFingerprint = [UInt8](repeating: 0xB2, count: 32)
    static let operationID = UUID(uuidString: "0f8e4c1a-1111-4222-8333-444455556666")!
    static let dependencyID = UUID(uuidString: "9a9a9a9a-1111-4222-8333-444455556666")!
    static let badTag = ControlHeaderError.invalidValue(header: ControlHeaders.tagName, value: "")
    static let storedResponse = StoredResponse(status: 201, headers: ["X-Upstream": "yes"], body: Array("created".utf8))

    static func operation(_ status: OperationStatus, fingerprint: [UInt8] = sameFingerprint) -> OperationSnapshot {
        OperationSnapshot(id: operationID, origin: Origin(scheme: .http, host: "127.0.0.1", port: 9000), method: "POST",
                          target: "/pay", idempotencyKey: "pay-1", fingerprint: fingerprint, priority: .normal, tag: nil,
                          dependsOn: nil, createdAt: 1_700_000_000_000, state: OperationState(status: status))
    }

    /// A whole queueable request: by default a new one with a client key, to an online origin
    /// whose lane is empty, without control headers.
    static func request(key: IdempotencyKeyHeader = .given("pay-1"), known: QueueDecision.KnownKey = .unknown,
                        _ connectivity: QueueDecision.Connectivity = .online, laneHasQueued: Bool = false,
                        forceQueue: Bool = false, dependency: QueueDecision.Dependency = .absent) -> QueueDecision.Request {
        // As the exchange gathers it: the request is hashed only when its key is known.
        let fingerprint = known == .unknown ? [] : sameFingerprint
        return QueueDecision.Request(key: key, known: known, fingerprint: fingerprint, connectivity: connectivity,
                                     laneHasQueued: laneHasQueued, forceQueue: forceQueue, dependency: dependency)
    }

    static let headRows: [HeadRow] = [
        HeadRow(rule: "a queueable request is decided once its body is in, whatever the origin's state",
                control: .success(ControlHeaders()), method: .queueable, expected: .readBody),
        HeadRow(rule: "a bad control header on a queueable request is 400 at the head",
                control: .failure(badTag), method: .queueable, expected: .reject(.controlHeader(badTag))),
        HeadRow(rule: "a bad control header is 400 on any method, even to an online origin",
                control: .failure(badTag), method: .notQueueable(.online), expected: .reject(.controlHeader(badTag))),
        HeadRow(rule: "a bad control header wins over an offline origin's 503",
                control: .failure(.repeated(header: ControlHeaders.modeName)), method: .notQueueable(.offline),
                expected: .reject(.controlHeader(.repeated(header: ControlHeaders.modeName)))),
        HeadRow(rule: "a method that is not queueable is forwarded to an online origin",
                control: .success(ControlHeaders()), method: .notQueueable(.online), expected: .forward),
        HeadRow(rule: "a method that is not queueable gets 503 while its origin is unreachable",
                control: .success(ControlHeaders()), method: .notQueueable(.offline), expected: .reject(.originOffline)),
        HeadRow(rule: "a method that is not queueable gets 503 while forced offline",
                control: .success(ControlHeaders()), method: .notQueueable(.forcedOffline), expected: .reject(.originOffline)),
        HeadRow(rule: "Outbox-Mode: queue does not make a method queueable",
                control: .success(ControlHeaders(forceQueue: true)), method: .notQueueable(.offline),
                expected: .reject(.originOffline)),
    ]

    @Test(arguments: headRows)
    func atTheHead(_ row: HeadRow) {
        #expect(QueueDecision.atHead(control: row.control, method: row.method) == row.expected)
    }

    static let rows: [Row] = [
        // Forward
        Row(rule: "online, lane empty: forwarded", request: request(), expected: .forward),
        Row(rule: "online, lane empty, no client key (one is made up): forwarded",
            request: request(key: .absent), expected: .forward),
        Row(rule: "an unresolved dependency does not stop a forward",
            request: request(dependency: .unresolved("order-9")), expected: .forward),
        // Store
        Row(rule: "origin unreachable: stored",
            request: request(.offline), expected: .store(dependsOn: nil)),
        Row(rule: "forced offline, origin believed online: stored",
            request: request(.forcedOffline), expected: .store(dependsOn: nil)),
        Row(rule: "lane holds work: stored even while online, so nothing overtakes it",
            request: request(laneHasQueued: true), expected: .store(dependsOn: nil)),
        Row(rule: "Outbox-Mode: queue: stored while online",
            request: request(forceQueue: true), expected: .store(dependsOn: nil)),
        Row(rule: "stored with its resolved dependency",
            request: request(.offline, dependency: .resolved(dependencyID)), expected: .store(dependsOn: dependencyID)),
        Row(rule: "stored with no client key (one is made up)",
            request: request(key: .absent, .offline), expected: .store(dependsOn: nil)),
        // Refuse the key
        Row(rule: "an invalid key is 400 before anything else, even offline",
            request: request(key: .invalid, .offline, laneHasQueued: true), expected: .reject(.invalidKey)),
        Row(rule: "several keys are 400, even with Outbox-Mode: queue",
            request: request(key: .repeated, forceQueue: true), expected: .reject(.repeatedKey)),
        // A key the queue knows
        Row(rule: "completed, same request: its stored response, online",
            request: request(known: .operation(operation(.completed), storedResponse: storedResponse, sameCredentials: true)),
            expected: .replay(storedResponse, operation: operationID)),
        Row(rule: "completed, same request: its stored response, even forced offline",
            request: request(known: .operation(operation(.completed), storedResponse: storedResponse, sameCredentials: true), .forcedOffline),
            expected: .replay(storedResponse, operation: operationID)),
        Row(rule: "completed, same request: its stored response, even with Outbox-Mode: queue and a queued lane",
            request: request(known: .operation(operation(.completed), storedResponse: storedResponse, sameCredentials: true),
                             laneHasQueued: true, forceQueue: true),
            expected: .replay(storedResponse, operation: operationID)),
        Row(rule: "completed, same request, response unreadable: 202 for the operation",
            request: request(known: .operation(operation(.completed), storedResponse: nil, sameCredentials: true)),
            expected: .accept(operation(.completed))),
        Row(rule: "pending, same request: 202 for it, not stored twice, offline",
            request: request(known: .operation(operation(.pending), storedResponse: nil, sameCredentials: true), .offline),
            expected: .accept(operation(.pending))),
        Row(rule: "a known key answers for its operation even if the new dependency names nothing",
            request: request(known: .operation(operation(.pending), storedResponse: nil, sameCredentials: true), .offline,
                             dependency: .unresolved("order-9")),
            expected: .accept(operation(.pending))),
        Row(rule: "completed, same request, other credentials: 422, its stored response is not theirs",
            request: request(known: .operation(operation(.completed), storedResponse: storedResponse, sameCredentials: false)),
            expected: .reject(.keyInUse)),
        Row(rule: "completed, same request, other credentials: 422 even forced offline",
            request: request(known: .operation(operation(.completed), storedResponse: storedResponse, sameCredentials: false),
                             .forcedOffline),
            expected: .reject(.keyInUse)),
        Row(rule: "pending, same request, other credentials: 202 for it (nothing stored is revealed)",
            request: request(known: .operation(operation(.pending), storedResponse: nil, sameCredentials: false), .offline),
            expected: .accept(operation(.pending))),
        Row(rule: "completed, different request and other credentials: 422 for the request",
            request: request(known: .operation(operation(.completed, fingerprint: otherFingerprint),
                                               storedResponse: storedResponse, sameCredentials: false)),
            expected: .reject(.keyReused)),
        // The key reused for another request
        Row(rule: "completed, different request: 422, online",
            request: request(known: .operation(operation(.completed, fingerprint: otherFingerprint),
                                               storedResponse: storedResponse, sameCredentials: true)),
            expected: .reject(.keyReused)),
        Row(rule: "completed, different request: 422 even forced offline",
            request: request(known: .operation(operation(.completed, fingerprint: otherFingerprint),
                                               storedResponse: storedResponse, sameCredentials: true), .forcedOffline),
            expected: .reject(.keyReused)),
        Row(rule: "pending, different request: 422 even while unreachable with a queued lane",
            request: request(known: .operation(operation(.pending, fingerprint: otherFingerprint), storedResponse: nil, sameCredentials: true),
                             .offline, laneHasQueued: true),
            expected: .reject(.keyReused)),
        // Dependencies
        Row(rule: "stored with a dependency naming nothing: 400",
            request: request(.offline, dependency: .unresolved("order-9")), expected: .reject(.unknownDependency("order-9"))),
        Row(rule: "Outbox-Mode: queue with a dependency naming nothing: 400",
            request: request(forceQueue: true, dependency: .unresolved("order-9")),
            expected: .reject(.unknownDependency("order-9"))),
    ]

    @Test(arguments: rows)
    func wholeRequest(_ row: Row) {
        #expect(QueueDecision.decide(row.request) == row.expected)
    }

    @Test("a known operation that has no stored answer gets a 202 for it, whatever the origin's state",
          arguments: [OperationStatus.pending, .inProgress, .failed, .conflict],
          [QueueDecision.Connectivity.online, .offline, .forcedOffline])
    func knownOperationIsAccepted(status: OperationStatus, connectivity: QueueDecision.Connectivity) {
        let known = QueueDecision.KnownKey.operation(Self.operation(status), storedResponse: nil, sameCredentials: true)
        #expect(QueueDecision.decide(Self.request(known: known, connectivity)) == .accept(Self.operation(status)))
    }

    @Test("every outcome is some row's answer")
    func tableCoversEveryOutcome() {
        let outcomes = Self.headRows.map(\.expected) + Self.rows.map(\.expected)
        func has(_ matches: (QueueDecision) -> Bool) -> Bool { outcomes.contains(where: matches) }
        #expect(has { if case .readBody = $0 { true } else { false } })
        #expect(has { if case .forward = $0 { true } else { false } })
        #expect(has { if case .store = $0 { true } else { false } })
        #expect(has { if case .replay = $0 { true } else { false } })
        #expect(has { if case .accept = $0 { true } else { false } })
        #expect(has { if case .reject = $0 { true } else { false } })
    }

    @Test("storing after forwarding found the origin unreachable keeps the dependency rule")
    func storingAfterForwarding() {
        #expect(QueueDecision.storing(.absent) == .store(dependsOn: nil))
        #expect(QueueDecision.storing(.resolved(Self.dependencyID)) == .store(dependsOn: Self.dependencyID))
        #expect(QueueDecision.storing(.unresolved("order-9")) == .reject(.unknownDependency("order-9")))
    }

    @Test("the queue's answer to a store: 202 once on disk, 422 for a key taken meanwhile, else 507")
    func afterTheStore() {
        let info = Self.operation(.pending)
        #expect(QueueDecision.stored(.success(info)) == .accept(info))
        #expect(QueueDecision.stored(.failure(.keyConflict)) == .reject(.keyReused))
        #expect(QueueDecision.stored(.failure(.full("queue.maxOperations (3) reached")))
            == .reject(.insufficientStorage("queue.maxOperations (3) reached")))
        #expect(QueueDecision.stored(.failure(.storage("disk full"))) == .reject(.insufficientStorage("disk full")))
    }

    struct RefusalRow: Sendable, CustomTestStringConvertible {
        var refusal: QueueRefusal
        var status: Int
        var message: String
        var testDescription: String { "\(refusal) → \(status)" }
    }

    @Test("each refusal's status and message, naming the configured header", arguments: [
        RefusalRow(refusal: .controlHeader(badTag), status: 400, message: #"invalid Outbox-Tag header value """#),
        RefusalRow(refusal: .originOffline, status: 503,
                   message: "upstream http://api.local:9000 is offline; only POST, PUT requests are queued"),
        RefusalRow(refusal: .invalidKey, status: 400, message: "X-Request-Key must be 1 to 255 visible ASCII characters"),
        RefusalRow(refusal: .repeatedKey, status: 400, message: "several X-Request-Key headers"),
        RefusalRow(refusal: .keyReused, status: 422,
                   message: "X-Request-Key was already used for a different request (method, target or body)"),
        RefusalRow(refusal: .unknownDependency("order-9"), status: 400,
                   message: "Outbox-Depends-On: no operation with id or key order-9"),
        RefusalRow(refusal: .insufficientStorage("disk full"), status: 507,
                   message: "the queue cannot store this request: disk full"),
    ])
    func refusalAnswers(_ row: RefusalRow) {
        let error = row.refusal.error(idempotencyHeader: "X-Request-Key", origin: Origin(scheme: .http, host: "api.local", port: 9000),
                                      queueMethods: "POST, PUT")
        #expect(error.status == row.status)
        #expect(error.message == row.message)
    }
}

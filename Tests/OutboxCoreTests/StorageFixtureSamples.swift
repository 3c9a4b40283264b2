import Foundation
@testable import OutboxModel
@testable import OutboxStorage

/// The records of `StorageMigrationTests`' checked-in version 1 segments, built the same way
/// by the code that wrote those segments (main at 5d0e442, before the version 2 framing) and by
/// the test that migrates them: fixed ids and times, every kind of record and field.
enum StorageFixtureSamples {
    static let a = UUID(uuidString: "0A000000-0000-4000-8000-00000000000A")!
    static let b = UUID(uuidString: "0B000000-0000-4000-8000-00000000000B")!
    static let c = UUID(uuidString: "0C000000-0000-4000-8000-00000000000C")!
    static let d = UUID(uuidString: "0D000000-0000-4000-8000-00000000000D")!

    static func request(_ id: UUID, index: Int, bodySize: Int) -> OperationRequest {
        OperationRequest(
            id: id, origin: Origin(scheme: index % 2 == 0 ? .http : .https, host: "fixture-\(index).example.test", port: 8000 + index),
            method: index == 1 ? "PUT" : "POST", target: "/fixture/\(index)?q=\(index)",
            headers: [("Host", "fixture-\(index).example.test"), ("X-Dup", "one"), ("X-Dup", "two")],
            body: (0..<bodySize).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }, idempotencyKey: "fixture-key-\(index)",
            fingerprint: [UInt8](repeating: UInt8(index), count: 32), priority: index == 0 ? .high : .normal,
            tag: index == 0 ? "nightly" : nil, dependsOn: index == 3 ? a : nil, createdAt: 1_700_000_000_000 + Int64(index))
    }

    static var requests: [OperationRequest] {
        var first = request(a, index: 0, bodySize: 100)
        first.orderingKey = "customer-42"
        return [first, request(b, index: 1, bodySize: 5), request(c, index: 2, bodySize: 40), request(d, index: 3, bodySize: 300)]
    }

    // Each state's `attempts` is the count its retry count implies (`retryCount + 1` after an
    // attempt), which is what a state the old code wrote (without the field) reads back as, and
    // so what the encoder writes without the field: the bytes stay the old code's.
    static let completed = OperationState(
        status: .completed, retryCount: 2, lastAttemptAt: 1_700_000_001_000, nextAttemptAt: nil, lastError: "HTTP 503",
        response: StoredResponse(status: 201, headers: [("Content-Type", "text/plain"), ("Set-Cookie", "a=1")], body: Array("created".utf8)),
        attempts: 3)
    static let failed = OperationState(
        status: .failed, retryCount: 5, lastAttemptAt: 1_700_000_002_000, nextAttemptAt: 1_700_000_003_000, lastError: "HTTP 500",
        attempts: 6)

    /// In log order.
    static var records: [LogRecord] {
        let requests = requests
        return [.created(requests[0], OperationState()), .created(requests[1], OperationState()), .updated(a, completed),
                .created(requests[2], OperationState()), .deleted(c), .updated(b, failed), .created(requests[3], OperationState())]
    }
}

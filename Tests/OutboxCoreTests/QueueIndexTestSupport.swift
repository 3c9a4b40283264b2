import Foundation
@testable import OutboxModel
@testable import OutboxQueue
import Testing

/// Builders shared by the queue index tests.
enum QueueIndexFixture {
    static let originA = Origin(scheme: .http, host: "a.local", port: 9000)
    static let originB = Origin(scheme: .http, host: "b.local", port: 9000)
    static let originC = Origin(scheme: .https, host: "c.local", port: 443)

    /// A recognisable id for operation number `n`.
    static func id(_ n: Int) -> UUID {
        UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", n)) ?? UUID()
    }

    static func insert(_ index: inout QueueIndex<Int>, _ n: Int, origin: Origin = originA,
                       priority: OperationPriority = .normal, dependsOn: Int? = nil, tag: String? = nil,
                       createdAt: Int64 = 0, orderingKey: String? = nil, state: OperationState = OperationState()) throws {
        try index.insert(id: id(n), origin: origin, idempotencyKey: "key-\(n)", priority: priority, tag: tag,
                         dependsOn: dependsOn.map(id), createdAt: createdAt, orderingKey: orderingKey, state: state,
                         locator: n)
    }

    static func setStatus(_ index: inout QueueIndex<Int>, _ n: Int, _ status: OperationStatus,
                          nextAttemptAt: Int64? = nil) throws {
        try index.update(id(n), state: OperationState(status: status, nextAttemptAt: nextAttemptAt))
    }

    /// Delivers the lane's operations one by one (each attempt completes at once) and returns
    /// the operation numbers in delivery order; stops when the lane does not deliver.
    static func drain(_ index: inout QueueIndex<Int>, origin: Origin = originA, now: Int64 = 0) throws -> [Int] {
        var order: [Int] = []
        for _ in 0..<10_000 {
            guard case .deliver(let id) = index.nextReady(origin: origin, now: now).next else { break }
            try index.update(id, state: OperationState(status: .inProgress))
            #expect(index.nextReady(origin: origin, now: .max).next == .busy)
            try index.update(id, state: OperationState(status: .completed))
            order.append(number(id))
        }
        return order
    }

    static func number(_ id: UUID) -> Int {
        Int(id.uuidString.suffix(12)) ?? -1
    }
}

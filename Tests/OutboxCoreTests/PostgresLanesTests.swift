import Foundation
import OutboxModel
import OutboxPostgres
import Synchronization
import TestPostgres
import TestPrerequisites
import Testing

/// Lane claims on a real PostgreSQL server, as several instances make them: a lane with work
/// goes to one holder at a time, a live lease is never taken and a lapsed one is, with a new
/// fence that shuts the old holder out; the lane's count of unfinished work stays exact while
/// adds and releases race, and adders of one lane commit in the order their `seq` says.
@Suite(.requires(PostgresServer.isInstalled, PostgresServer.missing))
struct PostgresLanesTests {
    /// A migrated schema of its own, and connections to it named after it (so a test can watch
    /// its own sessions wait).
    struct Queue: Sendable {
        let server: PostgresServer
        let schema: String

        var conninfo: String { server.conninfo(schema: schema) + " application_name=\(schema)" }

        func connect() throws -> PostgresConnection { try PostgresConnection(conninfo) }

        /// `body` on a connection of its own, started now on a thread of its own, so that it
        /// can block on a lock while the test goes on.
        func started<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) -> ThreadResult<Result<T, any Error>> {
            ThreadResult {
                Result {
                    let connection = try PostgresConnection(conninfo)
                    defer { connection.close() }
                    return try body(connection)
                }
            }
        }

        /// How many of this queue's sessions wait for a lock, once `count` do (or the wait ran out).
        func lockWaiters(_ count: Int) async throws -> Int {
            try await PostgresServer.onThread { server in
                let watcher = try PostgresConnection(server.conninfo)
                defer { watcher.close() }
                return try watcher.waitFor(lockWaiters: count, application: schema)
            }
        }

        static func make() async throws -> Queue {
            try await PostgresServer.onThread { server in
                let schema = try server.makeSchema()
                let connection = try PostgresConnection(server.conninfo)
                defer { connection.close() }
                _ = try PostgresSchema.migrate(connection, schema: schema)
                return Queue(server: server, schema: schema)
            }
        }
    }

    /// The statements that add one pending operation to a lane, as the store sends them.
    static func add(origin: String, lane: String, key: String, id: String = UUID().uuidString.lowercased(),
                    priority: OperationPriority = .normal) -> [PostgresLanes.Statement] {
        var request = StorageSamples.request(0)
        request.priority = priority
        request.id = UUID(uuidString: id) ?? UUID()
        request.origin = PostgresRowText.origin(origin) ?? request.origin
        request.orderingKey = lane.isEmpty ? nil : lane
        request.idempotencyKey = key
        return PostgresOperations.addMany([request])
    }

    /// One operation of the lane finished, as the store's outcome and removal statements count it.
    static func finished(origin: String, lane: String) -> PostgresLanes.Statement {
        ("UPDATE lanes SET unfinished = unfinished - 1 WHERE origin = $1 AND lane = $2", [.text(origin), .text(lane)])
    }

    static func inTransaction(_ connection: PostgresConnection, _ statements: [PostgresLanes.Statement]) throws {
        _ = try connection.pipeline([("BEGIN", [])] + statements.map { ($0.sql, $0.parameters) } + [("COMMIT", [])])
    }

    static func unfinished(_ connection: PostgresConnection, _ origin: String, _ lane: String) throws -> String? {
        try connection.execute("SELECT unfinished FROM lanes WHERE origin = $1 AND lane = $2", [.text(origin), .text(lane)])
            .rows.first?.first ?? nil
    }

    /// Three instances claim an origin's 20 lanes at the same moment, 30 times over: every lane
    /// goes to exactly one of them each time.
    @Test func instancesClaimingTogetherGetEachLaneOnce() async throws {
        let queue = try await Queue.make()
        let origin = "http://claims.test"
        try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            for lane in 0..<20 { try Self.inTransaction(connection, Self.add(origin: origin, lane: "k\(lane)", key: "key\(lane)")) }
        }
        for _ in 0..<30 {
            let start = DispatchSemaphore(value: 0)
            let claimers = (0..<3).map { number in
                queue.started { connection in
                    start.wait()
                    return try PostgresLanes.claim(connection, origin: origin, holder: "instance-\(number)", leaseSeconds: 30, limit: 100)
                }
            }
            for _ in 0..<3 { start.signal() }
            var claimed: [[LaneClaim]] = []
            for claimer in claimers { claimed.append(try await claimer.value.get()) }
            let lanes = claimed.flatMap { $0.map(\.lane) }
            #expect(lanes.count == 20, "\(claimed.map(\.count))")
            #expect(Set(lanes).count == 20)
            let held = claimed
            try await PostgresServer.onThread { _ in
                let connection = try queue.connect()
                defer { connection.close() }
                for (number, claims) in held.enumerated() {
                    for claim in claims { #expect(try PostgresLanes.release(connection, claim, holder: "instance-\(number)")) }
                }
            }
        }
    }

    @Test func aLiveLeaseIsKeptALapsedOneIsTakenWithAFenceThatShutsTheOldHolderOut() async throws {
        let queue = try await Queue.make()
        let origin = "http://lease.test"
        let outcome = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            let uuid = UUID()
            let id = uuid.uuidString.lowercased()
            try Self.inTransaction(connection, Self.add(origin: origin, lane: "", key: "k", id: id))
            let first = try PostgresLanes.claim(connection, origin: origin, holder: "a", leaseSeconds: 30, limit: 10)
            let whileLive = try PostgresLanes.claim(connection, origin: origin, holder: "b", leaseSeconds: 30, limit: 10)
            // The lease runs out: a's instance stopped renewing it.
            try connection.execute("UPDATE lanes SET lease_until = now() - interval '1 second' WHERE origin = $1", [.text(origin)])
            let takeover = try PostgresLanes.claim(connection, origin: origin, holder: "b", leaseSeconds: 30, limit: 10)
            let renewedByA = try PostgresLanes.renew(connection, holder: "a", leaseSeconds: 30)
            let renewedByB = try PostgresLanes.renew(connection, holder: "b", leaseSeconds: 30)
            func fencedWrite(_ holder: String, _ fence: Int64?) throws -> Int {
                let write = PostgresOperations.record(uuid, OperationState(status: .completed, lastAttemptAt: 1, attempts: 1),
                                                      priority: .normal, instance: holder, holder: holder, fence: fence ?? -1)[0]
                return try connection.execute(write.sql, write.parameters).rows.count
            }
            let writeByA = try fencedWrite("a", first.first?.fence)
            let writeByB = try fencedWrite("b", takeover.first?.fence)
            let releasedByA = try first.first.map { try PostgresLanes.release(connection, $0, holder: "a") }
            return (first, whileLive, takeover, renewedByA, renewedByB, writeByA, writeByB, releasedByA)
        }
        let (first, whileLive, takeover, renewedByA, renewedByB, writeByA, writeByB, releasedByA) = outcome
        #expect(first.map(\.lane) == [""])
        #expect(whileLive.isEmpty)
        #expect(takeover.map(\.lane) == [""])
        #expect((takeover.first?.fence ?? 0) > (first.first?.fence ?? .max))
        #expect(renewedByA.isEmpty)
        #expect(renewedByB.map(\.fence) == takeover.map(\.fence))
        #expect(takeover.first?.takenOver == true, "a claim of a lapsed lease says it took the lane over")
        #expect(first.first?.takenOver == false, "a first claim took nothing over")
        #expect(writeByA == 0)
        #expect(writeByB == 1)
        #expect(releasedByA == false)
    }

    /// What a holder took ahead is marked on its lane: a claim that takes the lane over counts
    /// one attempt for each unfinished operation up to that mark (the old holder may have sent
    /// any of them) and for none past it, nor for one that arrived after the holder's last take
    /// (a higher priority sorts before the mark, but was never taken); a holder whose claim was
    /// taken over takes nothing; a clean release leaves the next claim nothing to count.
    @Test func aTakeoverCountsAnAttemptForWhatTheOldHolderTookAheadAndNoMore() async throws {
        let queue = try await Queue.make()
        let origin = "http://marks.test"
        let (afterTakeover, takenByOldHolder, afterRelease) = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            for n in 0..<5 { try Self.inTransaction(connection, Self.add(origin: origin, lane: "", key: "key\(n)")) }
            func attempts() throws -> [String] {
                try connection.execute("SELECT attempts FROM operations WHERE origin = $1 ORDER BY seq", [.text(origin)])
                    .rows.map { $0[0] ?? "NULL" }
            }
            func take(_ claim: LaneClaim?, _ holder: String, limit: Int) throws -> Int {
                let statement = PostgresOperations.takeAhead(origin: origin, lane: "", excluding: [], limit: limit, holder: holder,
                                                             fence: claim?.fence ?? -1)
                return try connection.execute(statement.sql, statement.parameters).rows.count
            }
            let a = try PostgresLanes.claim(connection, origin: origin, holder: "a", leaseSeconds: 30, limit: 1).first
            #expect(try take(a, "a", limit: 3) == 3)
            // Taken again with the first ones left out: the mark moves on, never back.
            #expect(try take(a, "a", limit: 1) == 1)
            // Urgent, after the last take: first in the lane's order, never taken.
            try Self.inTransaction(connection, Self.add(origin: origin, lane: "", key: "urgent", priority: .critical))
            try connection.execute("UPDATE lanes SET lease_until = now() - interval '1 second' WHERE origin = $1", [.text(origin)])
            let b = try PostgresLanes.claim(connection, origin: origin, holder: "b", leaseSeconds: 30, limit: 1).first
            #expect(b?.takenOver == true)
            let afterTakeover = try attempts()
            let takenByOldHolder = try take(a, "a", limit: 10)
            #expect(try take(b, "b", limit: 10) == 6)
            if let b { try PostgresLanes.release(connection, b, holder: "b") }
            let c = try PostgresLanes.claim(connection, origin: origin, holder: "c", leaseSeconds: 30, limit: 1).first
            #expect(c?.takenOver == false)
            return (afterTakeover, takenByOldHolder, try attempts())
        }
        // The mark of `take(limit: 3)` covered the first three; the one taken with limit 1 took
        // the first (nothing was left out), so the mark stayed at the third.
        #expect(afterTakeover == ["1", "1", "1", "0", "0", "0"])
        #expect(takenByOldHolder == 0, "a holder whose claim was taken over took \(takenByOldHolder)")
        #expect(afterRelease == ["1", "1", "1", "0", "0", "0"], "a clean release left an attempt to count: \(afterRelease)")
    }

    /// An old holder writes an outcome while another instance takes its lapsed lane over (the
    /// takeover counts attempts up to the old holder's mark, so it writes those states too): the
    /// outcome waits for the lane's row before it writes any state, and then finds the new fence
    /// there, even though its statement began before the takeover committed. It writes nothing,
    /// and neither waits for the other. (Writing the state first and checking the fence in the
    /// statement's snapshot, the outcome held the state the takeover needed while waiting for
    /// the lane's row the takeover held: a deadlock, and the write would have passed.)
    @Test func anOutcomeRacingATakeoverWaitsForTheLaneAndIsFencedOut() async throws {
        let queue = try await Queue.make()
        let origin = "http://race.test"
        let (first, old) = try await PostgresServer.onThread { _ -> (UUID, LaneClaim) in
            let connection = try queue.connect()
            defer { connection.close() }
            var ids: [UUID] = []
            for n in 0..<2 {
                let id = UUID()
                ids.append(id)
                try Self.inTransaction(connection, Self.add(origin: origin, lane: "", key: "k\(n)", id: id.uuidString.lowercased()))
            }
            let old = try #require(try PostgresLanes.claim(connection, origin: origin, holder: "a", leaseSeconds: 30, limit: 1).first)
            let take = PostgresOperations.takeAhead(origin: origin, lane: "", excluding: [], limit: 2, holder: "a", fence: old.fence)
            #expect(try connection.execute(take.sql, take.parameters).rows.count == 2)
            try connection.execute("UPDATE lanes SET lease_until = now() - interval '1 second' WHERE origin = $1", [.text(origin)])
            return (ids[0], old)
        }
        // The first operation's state held, so the takeover stops inside its statement with the
        // lane's row locked.
        let blocker = try await PostgresServer.onThread { _ in PostgresConnection.Sendable(try queue.connect()) }
        defer { blocker.connection.close() }
        try await PostgresServer.onThread { _ in
            _ = try blocker.connection.pipeline([("BEGIN", []), ("""
                SELECT 1 FROM states WHERE seq = (SELECT seq FROM requests WHERE id = $1::uuid) FOR UPDATE
                """, [.text(first.uuidString.lowercased())])])
        }
        let takeover = queue.started { connection in
            try PostgresLanes.claim(connection, origin: origin, holder: "b", leaseSeconds: 30, limit: 1)
        }
        #expect(try await queue.lockWaiters(1) == 1)
        let outcome = queue.started { connection -> Int in
            let write = PostgresOperations.record(first, OperationState(status: .completed, lastAttemptAt: 1, attempts: 1),
                                                  priority: .normal, instance: "a", holder: "a", fence: old.fence)[0]
            return try connection.execute(write.sql, write.parameters).rows.count
        }
        #expect(try await queue.lockWaiters(2) == 2)
        _ = try await PostgresServer.onThread { _ in try blocker.connection.execute("COMMIT") }
        let claims = try await takeover.value.get()
        let written = await outcome.value
        #expect(claims.map(\.takenOver) == [true])
        #expect(try written.get() == 0, "the old holder's outcome was written after the takeover")
        let state = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            return try connection.execute("SELECT status, attempts FROM operations WHERE id = $1::uuid", [.text(first.uuidString.lowercased())])
                .rows.first.map { $0.compactMap { $0 } }
        }
        #expect(state == ["pending", "1"])
    }

    @Test func aLaneWithoutWorkIsNotClaimedAndItsRowGoesWithTheRelease() async throws {
        let queue = try await Queue.make()
        let origin = "http://empty.test"
        let (claimedEmpty, row, again, fences) = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            try Self.inTransaction(connection, Self.add(origin: origin, lane: "k", key: "k1"))
            let claim = try #require(try PostgresLanes.claim(connection, origin: origin, holder: "a", leaseSeconds: 30, limit: 1).first)
            try connection.execute(Self.finished(origin: origin, lane: "k").sql, Self.finished(origin: origin, lane: "k").parameters)
            // Held and without work: nobody else may claim it, and the holder's release removes it.
            let claimedEmpty = try PostgresLanes.claim(connection, origin: origin, holder: "b", leaseSeconds: 30, limit: 1)
            try PostgresLanes.release(connection, claim, holder: "a")
            let row = try Self.unfinished(connection, origin, "k")
            // Made again by the next add: a fence it never gave before.
            try Self.inTransaction(connection, Self.add(origin: origin, lane: "k", key: "k2"))
            let again = try PostgresLanes.claim(connection, origin: origin, holder: "b", leaseSeconds: 30, limit: 1)
            return (claimedEmpty, row, again, (claim.fence, again.first?.fence ?? 0))
        }
        #expect(claimedEmpty.isEmpty)
        #expect(row == nil)
        #expect(again.map(\.lane) == ["k"])
        #expect(fences.1 > fences.0)
    }

    /// An add is under way (its transaction has locked the lane's row and not committed) when
    /// the lane's holder, with nothing left to do, releases it: the release waits for the add
    /// and then leaves the row, with the new operation counted, for the next claim.
    @Test func anAddInFlightKeepsTheLaneThatItsReleaseWouldRemove() async throws {
        let queue = try await Queue.make()
        let origin = "http://race.test"
        let claim = try await PostgresServer.onThread { _ -> LaneClaim in
            let connection = try queue.connect()
            defer { connection.close() }
            try Self.inTransaction(connection, Self.add(origin: origin, lane: "", key: "k1"))
            let claim = try #require(try PostgresLanes.claim(connection, origin: origin, holder: "a", leaseSeconds: 30, limit: 1).first)
            let done = Self.finished(origin: origin, lane: "")
            try connection.execute(done.sql, done.parameters)
            return claim
        }
        let adder = try await PostgresServer.onThread { _ in PostgresConnection.Sendable(try queue.connect()) }
        defer { adder.connection.close() }
        try await PostgresServer.onThread { _ in
            _ = try adder.connection.pipeline([("BEGIN", [])] + Self.add(origin: origin, lane: "", key: "k2").map { ($0.sql, $0.parameters) })
        }
        let release = queue.started { connection in try PostgresLanes.release(connection, claim, holder: "a") }
        #expect(try await queue.lockWaiters(1) == 1)
        _ = try await PostgresServer.onThread { _ in try adder.connection.execute("COMMIT") }
        #expect(try await release.value.get())
        let (count, next) = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            return (try Self.unfinished(connection, origin, ""),
                    try PostgresLanes.claim(connection, origin: origin, holder: "b", leaseSeconds: 30, limit: 1))
        }
        #expect(count == "1")
        #expect(next.map(\.lane) == [""])
    }

    /// A renewal and a batch of outcomes over the same lanes, both waiting for one of those lanes'
    /// rows: each takes the lanes' rows in one order (origin, then lane), so whichever gets the
    /// first row goes on to the second and the other waits behind it, in every order of the
    /// batch's rows. Taken in the order their joins produced, a batch holding lane "b" and
    /// waiting for "a" against a renewal holding "a" and waiting for "b" was a deadlock:
    /// PostgreSQL broke it after a second by failing one of them (a drain stalled meanwhile).
    @Test(arguments: [["b", "a"], ["a", "b"]])
    func aRenewalAndABatchOfOutcomesTakeTheLanesInOneOrder(_ batchOrder: [String]) async throws {
        let queue = try await Queue.make()
        let origin = "http://order.test"
        let (claims, ids) = try await PostgresServer.onThread { _ -> ([String: LaneClaim], [String: UUID]) in
            let connection = try queue.connect()
            defer { connection.close() }
            var ids: [String: UUID] = [:]
            for lane in ["a", "b"] {
                let id = UUID()
                ids[lane] = id
                try Self.inTransaction(connection, Self.add(origin: origin, lane: lane, key: "k-" + lane, id: id.uuidString.lowercased()))
            }
            let claims = try PostgresLanes.claim(connection, origin: origin, holder: "h", leaseSeconds: 30, limit: 10)
            return (Dictionary(uniqueKeysWithValues: claims.map { ($0.lane, $0) }), ids)
        }
        #expect(claims.count == 2)
        // Lane "a"'s row held by a transaction of its own: both statements must wait for it.
        let blocker = try await PostgresServer.onThread { _ in PostgresConnection.Sendable(try queue.connect()) }
        defer { blocker.connection.close() }
        try await PostgresServer.onThread { _ in
            _ = try blocker.connection.pipeline([("BEGIN", []), ("SELECT 1 FROM lanes WHERE origin = $1 AND lane = 'a' FOR UPDATE",
                                                                 [.text(origin)])])
        }
        let renewal = queue.started { connection in try PostgresLanes.renew(connection, holder: "h", leaseSeconds: 30) }
        #expect(try await queue.lockWaiters(1) == 1)
        let writes = batchOrder.compactMap { lane -> PostgresOperations.StateWrite? in
            guard let id = ids[lane], let claim = claims[lane] else { return nil }
            return PostgresOperations.StateWrite(id: id, state: OperationState(status: .completed, lastAttemptAt: 1, attempts: 1),
                                                 priority: .normal, instance: "i", holder: "h", fence: claim.fence)
        }
        let batch = queue.started { connection in
            try Self.inTransaction(connection, PostgresOperations.recordMany(writes))
        }
        #expect(try await queue.lockWaiters(2) == 2)
        _ = try await PostgresServer.onThread { _ in try blocker.connection.execute("COMMIT") }
        let renewed = await renewal.value
        let written = await batch.value
        #expect(try renewed.get().map(\.lane).sorted() == ["a", "b"])
        #expect(throws: Never.self) { try written.get() }
        let counts = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            return [try Self.unfinished(connection, origin, "a"), try Self.unfinished(connection, origin, "b")]
        }
        #expect(counts == ["0", "0"])
    }

    /// Two adds to one lane at once: the second waits for the first's commit before it takes
    /// its `seq`, so a lane's order by `seq` is the order its operations became visible in, even
    /// across instances (a deliverer never sees a later `seq` before an earlier one).
    @Test func addsToOneLaneCommitInTheOrderOfTheirSeq() async throws {
        let queue = try await Queue.make()
        let origin = "http://order.test"
        let first = try await PostgresServer.onThread { _ in PostgresConnection.Sendable(try queue.connect()) }
        defer { first.connection.close() }
        let firstID = UUID().uuidString.lowercased()
        let secondID = UUID().uuidString.lowercased()
        try await PostgresServer.onThread { _ in
            _ = try first.connection.pipeline([("BEGIN", [])]
                + Self.add(origin: origin, lane: "", key: "k1", id: firstID).map { ($0.sql, $0.parameters) })
        }
        let second = queue.started { connection in
            try Self.inTransaction(connection, Self.add(origin: origin, lane: "", key: "k2", id: secondID))
        }
        #expect(try await queue.lockWaiters(1) == 1)
        _ = try await PostgresServer.onThread { _ in try first.connection.execute("COMMIT") }
        try await second.value.get()
        let order = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            return try connection.execute("SELECT id::text FROM operations ORDER BY seq").rows.compactMap { $0[0] }
        }
        #expect(order == [firstID, secondID])
    }

    @Test func aKeyAlreadyStoredAddsNothingToItsLane() async throws {
        let queue = try await Queue.make()
        let origin = "http://keys.test"
        let (count, rows) = try await PostgresServer.onThread { _ in
            let connection = try queue.connect()
            defer { connection.close() }
            try Self.inTransaction(connection, Self.add(origin: origin, lane: "", key: "same"))
            try Self.inTransaction(connection, Self.add(origin: origin, lane: "", key: "same"))
            try Self.inTransaction(connection, Self.add(origin: "http://other.test", lane: "", key: "same"))
            return (try Self.unfinished(connection, origin, ""), try connection.execute("SELECT count(*) FROM operations").rows[0][0])
        }
        #expect(count == "1")
        #expect(rows == "2")
    }
}

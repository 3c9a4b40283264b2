/// One instance's claim on one lane of the shared queue: while it holds, that instance alone
/// delivers the lane's operations, and every write it makes for them names `fence`.
public struct LaneClaim: Sendable, Hashable {
    public let origin: String
    /// The ordering key, `""` for the origin's default lane.
    public let lane: String
    public let fence: Int64
    /// The claim took the lane from another holder whose lease had lapsed (a takeover).
    public let takenOver: Bool

    public init(origin: String, lane: String, fence: Int64, takenOver: Bool = false) {
        self.origin = origin
        self.lane = lane
        self.fence = fence
        self.takenOver = takenOver
    }
}

/// Which instance delivers each lane of the shared queue (SPEC §9): a lease table with fencing,
/// the `lanes` table of the schema. An instance claims lanes that have work and no live lease
/// for `leaseSeconds`, renews its claims while it delivers, and releases a lane it is done
/// with. A lease that lapsed (the instance died, hung, or lost the database) is taken by the
/// next instance that claims, with a new fence; the old holder's renewals and fenced writes
/// then match no row, so it can no longer record an outcome for an operation another instance
/// now delivers.
///
/// A table rather than advisory locks: a session lock lives on one connection, so it would tie
/// each lane to a connection of a small pool, vanish with a connection that merely dropped
/// while the instance still sends, and carry no fence that a write could be checked against.
/// Lease times are the database's clock (`now()`), so instances' clocks need not agree.
///
/// The statements that add and finish operations keep each lane's `unfinished` count in the
/// same transaction, under the lane row's lock: adders of one lane commit one after another
/// (so arrival order in `seq` is commit order, also across instances), and a lane row is
/// removed only when no transaction is adding to it.
public enum PostgresLanes {
    public typealias Statement = PostgresGroupCommit.Statement

    /// Locks (making it if needed) the row of a lane an operation is about to be added to:
    /// the first statement of an add, before the operation's `INSERT` takes its `seq`.
    public static func enter(origin: String, lane: String) -> Statement {
        ("INSERT INTO lanes (origin, lane) VALUES ($1, $2) ON CONFLICT (origin, lane) DO UPDATE SET unfinished = lanes.unfinished",
         [.text(origin), .text(lane)])
    }

    /// SQL for a CTE that locks the rows of `lanes` meeting `condition` (on `lanes l`) in the
    /// one order every statement that locks several lanes' rows takes them, and gives back their
    /// keys, holders and fences as the latest commit left them: origin, then lane, byte by byte (as `lockOrder` orders a group commit's adds). A
    /// statement that takes them in the order its join happens to produce can wait for one
    /// while holding another that a second statement, holding the first, waits for: a
    /// renewal against a batch of outcomes was such a deadlock, a one-second stall of the
    /// drain until PostgreSQL broke it by failing one of them.
    public static func lockedInOrder(where condition: String) -> String {
        "SELECT l.origin, l.lane, l.holder, l.fence FROM lanes l WHERE \(condition)"
            + " ORDER BY l.origin COLLATE \"C\", l.lane COLLATE \"C\" FOR UPDATE OF l"
    }

    /// `lockedInOrder` of the lanes named by `relation` (a CTE with `origin` and `lane`).
    public static func lockedInOrder(keysIn relation: String) -> String {
        lockedInOrder(where: "(l.origin, l.lane) IN (SELECT origin, lane FROM \(relation))")
    }

    /// SQL: the operation at `rank`, `seq` lies at or before the mark `markRank`, `markSeq` in
    /// its lane's order (an attempted operation first, then priority, then arrival: `lane_rank`
    /// descending, then `seq`), given as column expressions. The one statement of that order
    /// for the marks of what a holder took ahead (schema v4).
    public static func atOrBefore(rank: String, seq: String, markRank: String, markSeq: String) -> String {
        "(\(rank) > \(markRank) OR (\(rank) = \(markRank) AND \(seq) <= \(markSeq)))"
    }

    /// Claims up to `limit` lanes of `origin` that have work and no live lease, for
    /// `leaseSeconds`, and returns them. Rows another instance is claiming at this moment are
    /// skipped, not waited for. Taking over a lane whose holder stopped first counts one more
    /// attempt for each unfinished operation up to the mark of what it took ahead that had
    /// arrived by its latest take (schema v4, v5): it may have sent any of them. The new claim's
    /// mark starts afresh.
    public static func claim(_ connection: PostgresConnection, origin: String, holder: String, leaseSeconds: Double,
                             limit: Int) throws(PostgresError) -> [LaneClaim] {
        let result = try connection.execute("""
            WITH free AS (
                SELECT origin, lane, holder AS previous, taken_rank, taken_seq, taken_max_seq FROM lanes
                 WHERE origin = $1 AND unfinished > 0 AND (lease_until IS NULL OR lease_until < now())
                 ORDER BY lane LIMIT $4 FOR UPDATE SKIP LOCKED),
            counted AS (
                UPDATE states o SET attempts = o.attempts + 1 FROM free
                 WHERE free.previous IS NOT NULL AND free.taken_seq IS NOT NULL
                   AND o.origin = free.origin AND o.lane = free.lane AND o.status IN ('pending', 'inProgress')
                   AND \(atOrBefore(rank: "o.lane_rank", seq: "o.seq", markRank: "free.taken_rank", markSeq: "free.taken_seq"))
                   AND (free.taken_max_seq IS NULL OR o.seq <= free.taken_max_seq))
            UPDATE lanes SET holder = $2, fence = nextval('lane_fences'), lease_until = now() + make_interval(secs => $3::float8),
                   taken_rank = NULL, taken_seq = NULL, taken_max_seq = NULL
              FROM free WHERE lanes.origin = free.origin AND lanes.lane = free.lane
            RETURNING lanes.origin, lanes.lane, lanes.fence, free.previous IS NOT NULL AS taken_over
            """, [.text(origin), .text(holder), .text(String(leaseSeconds)), .int64(Int64(limit))])
        return claims(result)
    }

    /// Extends every lease `holder` still has by `leaseSeconds` and returns those claims: a
    /// lane missing from the answer was taken over, and its deliveries must stop.
    public static func renew(_ connection: PostgresConnection, holder: String,
                             leaseSeconds: Double) throws(PostgresError) -> [LaneClaim] {
        let result = try connection.execute("""
            WITH ordered AS (\(lockedInOrder(where: "l.holder = $1")))
            UPDATE lanes l SET lease_until = now() + make_interval(secs => $2::float8) FROM ordered
             WHERE l.origin = ordered.origin AND l.lane = ordered.lane AND l.holder = $1
            RETURNING l.origin, l.lane, l.fence
            """, [.text(holder), .text(String(leaseSeconds))])
        return claims(result)
    }

    /// Gives `claim` up (the lane waits, or has no work left) and removes the lane's row when it
    /// has no work; false when the claim was no longer held.
    @discardableResult
    public static func release(_ connection: PostgresConnection, _ claim: LaneClaim, holder: String) throws(PostgresError) -> Bool {
        let results = try connection.pipeline([
            ("BEGIN", []),
            // Nothing it took ahead is in flight any more: the mark goes with the claim.
            ("""
             UPDATE lanes SET holder = NULL, lease_until = NULL, taken_rank = NULL, taken_seq = NULL, taken_max_seq = NULL
              WHERE origin = $1 AND lane = $2 AND holder = $3 AND fence = $4
             """,
             [.text(claim.origin), .text(claim.lane), .text(holder), .int64(claim.fence)]),
            ("DELETE FROM lanes WHERE origin = $1 AND lane = $2 AND unfinished = 0 AND holder IS NULL",
             [.text(claim.origin), .text(claim.lane)]),
            ("COMMIT", []),
        ])
        return results[1].affected == 1
    }

    private static func claims(_ result: PostgresResult) -> [LaneClaim] {
        result.rows.indices.compactMap { row in
            guard let origin = result.value(row, "origin"), let lane = result.value(row, "lane"),
                  let fence = result.value(row, "fence").flatMap({ Int64($0) }) else { return nil }
            return LaneClaim(origin: origin, lane: lane, fence: fence, takenOver: result.value(row, "taken_over") == "t")
        }
    }
}

import Foundation
import OutboxHTTP
import OutboxModel
import OutboxQueue

/// The statements the PostgreSQL store sends beyond one operation's add and fenced write: what
/// the proxy asks before it decides, a lane's next operations taken for delivery, and the admin
/// API's reads and writes over the whole shared queue.
extension PostgresOperations {
    // MARK: - The proxy's questions

    /// The operation of `origin` holding `key`, with the answer it completed with.
    public static func keyHolder(_ key: String, origin: Origin) -> Statement {
        ("SELECT \(summaryColumns), \(answerColumns) FROM operations WHERE origin = $1 AND idempotency_key = $2",
         [.text(origin.description), .text(key)])
    }

    /// Row `row` of a `keyHolder` read: the summary with its stored answers.
    public static func withAnswers(_ result: PostgresResult, row: Int) throws(DecodeError) -> Row {
        let summary = try summary(result, row: row)
        var snapshot = summary.snapshot
        var state = snapshot.state
        state.response = try answer(result, row: row, prefix: "response")
        state.conflict = try answer(result, row: row, prefix: "conflict")
        snapshot.state = state
        return Row(seq: summary.seq, snapshot: snapshot, instance: summary.instance)
    }

    /// Operations of the lane not finished yet (none when the lane has no row).
    public static func laneUnfinished(origin: Origin, orderingKey: String?) -> Statement {
        ("SELECT unfinished FROM lanes WHERE origin = $1 AND lane = $2", [.text(origin.description), .text(orderingKey ?? "")])
    }

    /// `Outbox-Depends-On` resolved as the local queue does: an operation id (of any origin),
    /// else an idempotency key of `origin`.
    public static func dependency(_ reference: String, origin: Origin) -> Statement {
        if let id = UUID(uuidString: reference) {
            return ("""
                    SELECT id::text AS id FROM requests WHERE id = $1::uuid
                    UNION ALL SELECT id::text FROM requests WHERE origin = $2 AND idempotency_key = $3 LIMIT 1
                    """, [.text(id.lowercasedText), .text(origin.description), .text(reference)])
        }
        return ("SELECT id::text AS id FROM requests WHERE origin = $1 AND idempotency_key = $2",
                [.text(origin.description), .text(reference)])
    }

    // MARK: - Delivery

    /// Bodies up to this size come with the operations taken ahead; a larger one is read when
    /// its operation reaches the head of its lane, so the 64 operations a lane takes ahead hold
    /// 1 MiB of bodies at most.
    public static let aheadBodyLimit = 16 * 1024

    /// Takes the next `limit` operations of a lane held by `holder` under `fence`, leaving out
    /// the arrival numbers `excluding` (those the holder has already: left out by `states`'
    /// `seq`, before their requests are read) and those whose dependency has not ended
    /// (`QueueRules.dependency`: they wait out of order), and marks on the lane's row how far in
    /// its order they reach (schema v4): a claim that takes the lane over from a holder that
    /// stopped first counts one more attempt for every operation up to that mark, so an attempt
    /// sent after a crash is numbered past every one sent before it (SPEC §4), and no operation's
    /// row is written to take it. Nothing comes back unless the mark was written, under the lane
    /// row's lock: a holder whose claim was just taken over takes nothing. An operation left
    /// `inProgress` by a holder that stopped is taken too: it is sent again. The rows come back
    /// in any order; `aheadRow` decodes them, and the caller sorts them by rank and `seq`.
    public static func takeAhead(origin: String, lane: String, excluding: [Int64], limit: Int,
                                 holder: String, fence: Int64) -> Statement {
        var excluded = PostgresArray(of: .int8)
        for seq in excluding { excluded.append(int8: seq) }
        return ("""
         WITH next AS (
             SELECT \(summaryColumns(requests: "r.")), lane_rank, headers::text AS headers, octet_length(body) AS body_length,
                    CASE WHEN octet_length(body) <= \(aheadBodyLimit) THEN body END AS body,
                    (SELECT d.status FROM operations d WHERE d.id = r.depends_on) AS dependency_status
               FROM \(joined)
              WHERE s.origin = $1 AND s.lane = $2 AND \(unfinished) AND NOT (s.seq = ANY($3::bigint[]))
                AND (r.depends_on IS NULL
                     -- A scalar subquery, one probe of the id index per row: as NOT EXISTS the
                     -- planner may hash every unfinished operation of the table instead.
                     OR coalesce((SELECT d.status FROM operations d WHERE d.id = r.depends_on), '') NOT IN ('pending', 'inProgress'))
              ORDER BY s.lane_rank DESC, s.seq LIMIT \(max(1, limit))),
         -- The furthest of them in the lane's order (the lowest rank, and its latest seq), and
         -- the latest arrival among them.
         last AS (
             SELECT r.lane_rank, (SELECT max(seq) FROM next WHERE next.lane_rank = r.lane_rank) AS seq, r.max_seq
               FROM (SELECT min(lane_rank) AS lane_rank, max(seq) AS max_seq FROM next) r WHERE r.lane_rank IS NOT NULL),
         marked AS (
             -- The mark only moves further in the lane's order (what is here was taken with an
             -- earlier one left out); the row is written either way, which checks the claim.
             UPDATE lanes l
                SET taken_rank = CASE WHEN \(further) THEN last.lane_rank ELSE l.taken_rank END,
                    taken_seq = CASE WHEN \(further) THEN last.seq ELSE l.taken_seq END,
                    taken_max_seq = greatest(l.taken_max_seq, last.max_seq)
               FROM last
              WHERE l.origin = $1 AND l.lane = $2 AND l.holder = $4 AND l.fence = $5
             RETURNING 1)
         SELECT * FROM next WHERE EXISTS (SELECT 1 FROM marked)
         """, [.text(origin), .text(lane), excluded.finish(), .text(holder), .int64(fence)])
    }

    /// The last operation taken (`last`) lies further in the lane's order than the lane's mark.
    private static let further = "(l.taken_seq IS NULL OR NOT "
        + PostgresLanes.atOrBefore(rank: "last.lane_rank", seq: "last.seq", markRank: "l.taken_rank", markSeq: "l.taken_seq") + ")"

    /// An operation taken ahead: its row, its request (nil while its body is too large to have
    /// come along), its place in the lane and its dependency's status.
    public struct AheadRow: Sendable {
        public let row: Row
        public let request: OperationRequest?
        public let headers: HTTPHeaders
        public let rank: Int
        public let dependencyStatus: OperationStatus?
    }

    /// Row `row` of a `takeAhead` answer.
    public static func aheadRow(_ result: PostgresResult, row: Int) throws(DecodeError) -> AheadRow {
        let summary = try summary(result, row: row)
        guard let headersText = result.value(row, "headers"), let headers = headers(fromJSON: headersText) else {
            throw DecodeError(column: "headers", value: result.value(row, "headers"))
        }
        guard let rankText = result.value(row, "lane_rank"), let rank = Int(rankText) else {
            throw DecodeError(column: "lane_rank", value: result.value(row, "lane_rank"))
        }
        let dependencyStatus = try result.value(row, "dependency_status").map { text throws(DecodeError) -> OperationStatus in
            guard let status = OperationStatus(rawValue: text) else { throw DecodeError(column: "dependency_status", value: text) }
            return status
        }
        var request: OperationRequest?
        if result.value(row, "body") != nil {
            guard let body = result.bytes(row, "body") else { throw DecodeError(column: "body", value: result.value(row, "body")) }
            request = OperationRequest(summary.snapshot, headers: headers, body: body)
        }
        return AheadRow(row: summary, request: request, headers: headers, rank: rank, dependencyStatus: dependencyStatus)
    }

    /// The whole request of `id` (its body too): for an operation whose body did not come ahead.
    public static func request(_ id: UUID) -> Statement {
        ("SELECT \(summaryColumns), headers::text AS headers, body FROM operations WHERE id = $1::uuid", [.text(id.lowercasedText)])
    }

    /// What of the held operations `ids` is still there and unfinished, with their states: a
    /// holder's look after its lane was poked.
    public static func stillUnfinished(_ ids: [UUID]) -> Statement {
        ("SELECT \(summaryColumns) FROM operations WHERE id = ANY($1::uuid[]) AND \(unfinished)", [.text(uuidArray(ids))])
    }

    // MARK: - The admin API

    /// Operations per status over the whole shared queue.
    public static let countsByStatus: Statement = (
        "SELECT status, sum(n) AS n FROM status_counts GROUP BY status HAVING sum(n) <> 0", [])

    /// How many operations the queue holds, in every status: from the kept counts, not a scan.
    public static let countAll: Statement = ("SELECT coalesce(sum(n), 0) AS n FROM status_counts", [])

    /// When the oldest unfinished operation was made (`seq` order is arrival order).
    public static let oldestUnfinished: Statement = ("""
        SELECT min(created_at) AS created_at FROM (
            (SELECT created_at FROM operations WHERE status = 'pending' ORDER BY seq LIMIT 1)
            UNION ALL (SELECT created_at FROM operations WHERE status = 'inProgress' ORDER BY seq LIMIT 1)) oldest
        """, [])

    /// Unfinished operations of an origin, from its lanes' counts.
    public static func unfinished(origin: Origin) -> Statement {
        ("SELECT coalesce(sum(unfinished), 0) AS n FROM lanes WHERE origin = $1", [.text(origin.description)])
    }

    /// The lanes of an origin with an attempt in flight.
    public static func inFlightLanes(origin: Origin) -> Statement {
        ("SELECT DISTINCT lane FROM states WHERE status = 'inProgress' AND origin = $1", [.text(origin.description)])
    }

    /// How many of `ids` the database still has as pending: one probe of the id index each (as
    /// `id = ANY(…) AND status = …` the planner could AND the ids' bitmap with one of every
    /// pending operation, a scan of the whole queue at each status poll while it drains).
    public static func pendingAmong(_ ids: [UUID]) -> Statement {
        ("""
         SELECT count(*) AS n FROM unnest($1::uuid[]) AS flying(id)
          WHERE (SELECT o.status FROM operations o WHERE o.id = flying.id) = 'pending'
         """, [.text(uuidArray(ids))])
    }

    /// Every operation's unfinished count, for `drain`.
    public static let unfinishedTotal: Statement = ("SELECT coalesce(sum(unfinished), 0) AS n FROM lanes", [])

    /// Up to `limit` summaries in arrival order after the operation `after`, filtered.
    public static func list(status: OperationStatus?, tag: String?, origin: Origin?, orderingKey: String?, after: UUID?,
                            limit: Int) -> Statement {
        var conditions: [String] = []
        var parameters: [PostgresValue] = []
        func bind(_ value: PostgresValue) -> String {
            parameters.append(value)
            return "$\(parameters.count)"
        }
        if let status { conditions.append("status = \(bind(.text(status.rawValue)))") }
        if let tag { conditions.append("tag = \(bind(.text(tag)))") }
        if let origin { conditions.append("origin = \(bind(.text(origin.description)))") }
        if let orderingKey { conditions.append("lane = \(bind(.text(orderingKey)))") }
        if let after {
            conditions.append("seq > coalesce((SELECT seq FROM requests WHERE id = \(bind(.text(after.lowercasedText)))::uuid), 0)")
        }
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        return ("SELECT \(summaryColumns) FROM operations \(filter) ORDER BY seq LIMIT \(bind(.int64(Int64(limit))))", parameters)
    }

    /// The status and lane of `id`, its state locked for the admin write that follows in the
    /// same transaction.
    public static func lockedStatus(_ id: UUID) -> Statement {
        ("SELECT status, s.origin, s.lane FROM \(joined) WHERE r.id = $1::uuid FOR UPDATE OF s", [.text(id.lowercasedText)])
    }

    /// An admin retry of `id` (`QueueRules.retried`), after `lockedStatus` found it retryable:
    /// pending, due now, its retry budget whole again, its error and answers gone, its attempt
    /// count kept and, once attempted, ranked as its lane's head. A finished one (`wasFinished`)
    /// counts in its lane again. Its lane is poked; answers the lane's holder, poke and whether
    /// its lease is live.
    public static func retry(_ id: UUID, wasFinished: Bool, origin: String, lane: String) -> [Statement] {
        [("""
          UPDATE states s SET status = 'pending', retry_count = 0, next_attempt_at = NULL, last_error = NULL,
                 response_status = NULL, response_headers = NULL, response_body = NULL, response_omitted = NULL,
                 conflict_status = NULL, conflict_headers = NULL, conflict_body = NULL, conflict_omitted = NULL,
                 finished_at = NULL,
                 lane_rank = CASE WHEN s.attempts > 0 THEN \(OperationPriority.allCases.count) + r.priority ELSE r.priority END
            FROM requests r
           WHERE r.id = $1::uuid AND s.seq = r.seq
          """, [.text(id.lowercasedText)]),
         ("""
          INSERT INTO lanes AS l (origin, lane, unfinished, poke) VALUES ($1, $2, $3, 1)
          ON CONFLICT (origin, lane) DO UPDATE SET unfinished = l.unfinished + $3, poke = l.poke + 1
          RETURNING holder, poke, coalesce(lease_until > now(), false) AS live
          """, [.text(origin), .text(lane), .int64(wasFinished ? 1 : 0)]),
        ]
    }

    /// Which operations a removal takes: an SQL condition over `relation` (the view `operations`,
    /// or `states` for a condition on the state alone: through the view, a sweep of a thousand
    /// states joins their requests by a hash of the whole `requests` table) with its parameters,
    /// oldest first by `order`.
    public struct Selection: Sendable {
        public let condition: String
        public let parameters: [PostgresValue]
        public let relation: String
        public let order: String

        public init(_ condition: String, _ parameters: [PostgresValue] = [], relation: String = "operations", order: String = "seq") {
            self.condition = condition
            self.parameters = parameters
            self.relation = relation
            self.order = order
        }
    }

    /// Removes up to `limit` operations that `selection` chooses, none that arrived after `seq`
    /// `until`, takes the unfinished ones off their lanes' counts and pokes those lanes. Answers
    /// one row: `removed` (a JSON array of `[id, origin, lane, status, retryCount, lastError]`)
    /// and `lanes` (a JSON array of `[origin, lane, holder, poke, live]` for the lanes poked).
    /// The rows are found by `seq = ANY(ARRAY(…))`, which the planner reads through the key; with
    /// `seq IN (…)` it may hash-join a scan of the whole table.
    public static func remove(_ selection: Selection, until: Int64, limit: Int) -> Statement {
        let (condition, parameters, relation, order) = (selection.condition, selection.parameters, selection.relation, selection.order)
        let untilParameter = parameters.count + 1
        let limitParameter = parameters.count + 2
        return ("""
            WITH chosen AS (
                SELECT seq FROM \(relation) WHERE (\(condition)) AND seq <= $\(untilParameter) ORDER BY \(order) LIMIT $\(limitParameter)
                FOR UPDATE SKIP LOCKED),
            ended AS (
                DELETE FROM states WHERE seq = ANY(ARRAY(SELECT seq FROM chosen))
                RETURNING seq, origin, lane, status, retry_count, last_error),
            dropped AS (
                DELETE FROM requests WHERE seq = ANY(ARRAY(SELECT seq FROM ended)) RETURNING seq, id),
            gone AS (
                SELECT dropped.id, ended.origin, ended.lane, ended.status, ended.retry_count, ended.last_error
                  FROM ended JOIN dropped ON dropped.seq = ended.seq),
            counted AS (
                SELECT origin, lane, count(*) FILTER (WHERE status IN ('pending', 'inProgress')) AS n FROM gone GROUP BY origin, lane),
            ordered AS (\(PostgresLanes.lockedInOrder(keysIn: "counted"))),
            poked AS (
                UPDATE lanes l SET unfinished = l.unfinished - counted.n, poke = l.poke + 1
                  FROM counted JOIN ordered USING (origin, lane) WHERE l.origin = ordered.origin AND l.lane = ordered.lane
                RETURNING l.origin, l.lane, l.holder, l.poke, coalesce(l.lease_until > now(), false) AS live)
            SELECT coalesce((SELECT json_agg(json_build_array(id, origin, lane, status, retry_count, last_error)) FROM gone), '[]')::text
                       AS removed,
                   coalesce((SELECT json_agg(json_build_array(origin, lane, holder, poke, live)) FROM poked), '[]')::text AS lanes
            """, parameters + [.int64(until), .int64(Int64(limit))])
    }

    /// The newest `seq`: a bulk removal leaves what arrives after it starts alone.
    public static let lastSeq: Statement = ("SELECT coalesce(max(seq), 0) AS seq FROM requests", [])

    /// Clears the schedule of every pending operation in backoff (`QueueRules.flushed`) and
    /// pokes their lanes; answers the lanes.
    public static let flush: Statement = ("""
        WITH due AS (
            UPDATE states SET next_attempt_at = NULL WHERE status = 'pending' AND next_attempt_at IS NOT NULL
            RETURNING origin, lane),
        ordered AS (\(PostgresLanes.lockedInOrder(keysIn: "due")))
        UPDATE lanes l SET poke = l.poke + 1 FROM ordered WHERE l.origin = ordered.origin AND l.lane = ordered.lane
        RETURNING l.origin, l.lane
        """, [])

    /// `flush` for the operations of one origin held for credentials (`QueueRules.isHeldForCredentials`).
    public static func wakeHeld(origin: Origin) -> Statement {
        ("""
         WITH due AS (
             UPDATE states SET next_attempt_at = NULL
              WHERE origin = $1 AND status = 'pending' AND next_attempt_at IS NOT NULL
                AND (starts_with(last_error, $2) OR starts_with(last_error, $3))
             RETURNING origin, lane),
         ordered AS (\(PostgresLanes.lockedInOrder(keysIn: "due")))
         UPDATE lanes l SET poke = l.poke + 1 FROM ordered WHERE l.origin = ordered.origin AND l.lane = ordered.lane
         RETURNING l.origin, l.lane
         """, [.text(origin.description), .text(ReplayTransition.authErrorPrefix), .text(ReplayTransition.credentialsErrorPrefix)])
    }

    /// Whether the holder of a poked lane has seen poke `poke`, has let the lane go, or has
    /// lost its lease: an admin removal waits for one of them.
    public static func pokeSettled(origin: String, lane: String, holder: String, poke: Int64) -> Statement {
        ("""
         SELECT NOT EXISTS (SELECT 1 FROM lanes WHERE origin = $1 AND lane = $2 AND holder = $3 AND seen_poke < $4
                               AND lease_until > now()) AS settled
         """, [.text(origin), .text(lane), .text(holder), .int64(poke)])
    }

    /// Completed operations finished before `cutoff` (`completedRetentionSeconds`): removed in
    /// `finished_at` order, through the `states_finished_at` index, so a sweep that finds
    /// nothing reads nothing (in `seq` order it would walk every completed operation).
    public static func retention(cutoff: Int64) -> Selection {
        Selection("status = 'completed' AND finished_at IS NOT NULL AND finished_at < $1", [.int64(cutoff)], relation: "states",
                  order: "finished_at")
    }

    /// Fails as `expired` (`ReplayTransition.expire`, `QueueRules.expiryCutoff`) the pending
    /// operations created before `cutoff` whose lane no instance holds (a holder expires its own
    /// as it takes them), among the `limit` oldest pending ones: like the local index, it looks at
    /// the oldest first and no further (arrival order is creation order), so a sweep of a queue
    /// with nothing expired reads `limit` rows, not every pending one. Their lanes lose them.
    public static func expire(cutoff: Int64, limit: Int, now: Int64) -> Statement {
        ("""
         WITH oldest AS (SELECT seq FROM states WHERE status = 'pending' ORDER BY seq LIMIT $3),
         -- Their requests by key (a join could hash the whole table of requests instead).
         old AS (SELECT seq FROM requests WHERE seq = ANY(ARRAY(SELECT seq FROM oldest)) AND created_at < $1),
         expired AS (
             UPDATE states o SET status = 'failed', last_error = 'expired', next_attempt_at = NULL, finished_at = $2
              WHERE o.seq = ANY(ARRAY(SELECT seq FROM old)) AND o.status = 'pending'
                AND NOT EXISTS (SELECT 1 FROM lanes l WHERE l.origin = o.origin AND l.lane = o.lane AND l.holder IS NOT NULL
                                   AND l.lease_until > now())
             RETURNING o.origin, o.lane),
         counted AS (SELECT origin, lane, count(*) AS n FROM expired GROUP BY origin, lane),
         ordered AS (\(PostgresLanes.lockedInOrder(keysIn: "counted")))
         UPDATE lanes l SET unfinished = l.unfinished - counted.n FROM counted JOIN ordered USING (origin, lane)
          WHERE l.origin = ordered.origin AND l.lane = ordered.lane
         """, [.int64(cutoff), .int64(now), .int64(Int64(limit))])
    }

    /// `ids` as a PostgreSQL array literal of UUIDs (`{…,…}`): their text holds no character
    /// the literal would need to quote.
    static func uuidArray(_ ids: [UUID]) -> String {
        "{" + ids.map(\.lowercasedText).joined(separator: ",") + "}"
    }
}

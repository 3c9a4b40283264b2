import Foundation
import OutboxHTTP
import OutboxModel

/// An operation's rows: the statements the PostgreSQL store sends for them and the decoding of
/// the rows it reads back, from and into Model's operation values, as Storage's record codec
/// does for the local log. An operation is a row of `requests`, written once, and a row of
/// `states`, written at each outcome (schema v6); reads go through the view `operations` that
/// joins them, except those that follow a lane's order, which must name `states`. Headers are
/// JSON arrays of `[name, value]` pairs (readable in `psql`), bodies `bytea`, times
/// milliseconds since the epoch.
///
/// Every statement that finds operations is shaped for one index of the schema (the lane's
/// next operation, a key, a status in arrival order), so none scans the table: the tests check
/// the plans with `EXPLAIN` on a table of a few hundred thousand rows.
public enum PostgresOperations {
    public typealias Statement = PostgresGroupCommit.Statement

    /// The columns of a summary: everything but headers, bodies and stored answers, read from
    /// the view `operations` (schema v6: `requests` joined with `states`).
    static let summaryColumns = summaryColumns(requests: "")

    /// The columns of a summary read from `requests` and `states` joined by hand (a read in a
    /// lane's order, through the index of `states`): the columns both tables have (`seq`,
    /// `origin`, `lane`) are taken from `requests`, named `requests` (`"r."`).
    static func summaryColumns(requests r: String) -> String {
        """
        \(r)seq, id::text AS id, \(r)origin, \(r)lane, idempotency_key, fingerprint, credentials, method, target, priority, tag,
        depends_on::text AS depends_on, created_at, status, attempts, retry_count, last_attempt_at, next_attempt_at,
        last_error, instance
        """
    }

    /// `requests` joined with `states` (schema v6), named `r` and `s`: what the view
    /// `operations` is, for a statement that must say from which table it reads a lane.
    static let joined = "requests r JOIN states s ON s.seq = r.seq"
    static let answerColumns = """
        response_status, response_headers::text AS response_headers, response_body, response_omitted,
        conflict_status, conflict_headers::text AS conflict_headers, conflict_body, conflict_omitted
        """
    static let unfinished = "status IN ('pending', 'inProgress')"

    /// One operation as a row gives it back.
    public struct Row: Sendable, Equatable {
        /// Arrival order in the shared queue: listings page by it.
        public let seq: Int64
        public let snapshot: OperationSnapshot
        /// The instance that made the last attempt; nil before any.
        public let instance: String?
    }

    /// Why a row could not be turned back into an operation: a column Outbox did not write.
    public struct DecodeError: Error, Equatable, CustomStringConvertible {
        public let column: String
        public let value: String?
        public var description: String { "operations.\(column): unreadable value \(value.map { "\"\($0.prefix(80))\"" } ?? "NULL")" }
    }

    // MARK: - Writes

    /// Adds `request` to the shared queue, unless its origin holds its key already, and reads
    /// back the operation holding the key (this one, or the one stored first, by any instance):
    /// `addMany` of one request, then `byKey`.
    public static func add(_ request: OperationRequest) -> [Statement] {
        addMany([request]) + [byKey(request.idempotencyKey, origin: request.origin)]
    }

    /// Most adds one `INSERT` carries: a bound on one statement's size.
    public static let maxAddsPerStatement = 512

    /// Adds `requests`, all of one lane, as `add` does one: the lane locked once, then one
    /// prepared `INSERT` of every row that also raises the lane's count by those inserted (a key
    /// already held inserts nothing) and answers that number, `n`. When it is less than the
    /// number of requests, `byKeys` tells who holds each key. No statement when no request has
    /// a row.
    public static func addMany(_ requests: [OperationRequest]) -> [Statement] {
        guard let first = requests.first else { return [] }
        let origin = first.origin.description
        let lane = first.orderingKey ?? ""
        guard let rows = AddedRows(requests) else { return [] }
        return [PostgresLanes.enter(origin: origin, lane: lane), (addedRowsSQL, [.text(origin), .text(lane)] + rows.parameters)]
    }

    /// The rows of one lane's adds as one binary array per column (`PostgresArray`), in
    /// `addedRowsSQL`'s order: the statement is the same text for any number of rows, so each
    /// connection prepares it once.
    struct AddedRows {
        let parameters: [PostgresValue]

        /// Nil when no request has a row: a body spilled to a file that cannot be read back is
        /// no row (its add finds no holder).
        init?(_ requests: [OperationRequest]) {
            let state = OperationState()
            var ids = PostgresArray(of: .uuid), keys = PostgresArray(of: .text), fingerprints = PostgresArray(of: .bytea)
            var credentials = PostgresArray(of: .bytea), methods = PostgresArray(of: .text), targets = PostgresArray(of: .text)
            var headers = PostgresArray(of: .jsonb), bodies = PostgresArray(of: .bytea), priorities = PostgresArray(of: .int2)
            var tags = PostgresArray(of: .text), dependsOn = PostgresArray(of: .uuid), createdAt = PostgresArray(of: .int8)
            var laneRanks = PostgresArray(of: .int2)
            for request in requests {
                let body: [UInt8]
                if let spilled = request.spilledBody {
                    guard let read = try? spilled.bytes().get() else { continue }
                    body = read
                } else {
                    body = request.body
                }
                ids.append(uuid: request.id)
                keys.append(text: request.idempotencyKey)
                fingerprints.append(bytes: request.fingerprint)
                credentials.append(bytes: request.credentials)
                methods.append(text: request.method)
                targets.append(text: request.target)
                headers.append(jsonbWrittenBy: { appendHeadersJSON(request.headers, to: &$0) })
                bodies.append(bytes: body)
                priorities.append(int2: Int16(request.priority.rawValue))
                tags.append(text: request.tag)
                dependsOn.append(uuid: request.dependsOn)
                createdAt.append(int8: request.createdAt)
                laneRanks.append(int2: Int16(request.priority.laneRank(attempted: state.attempts > 0)))
            }
            guard ids.count > 0 else { return nil }
            parameters = [ids.finish(), keys.finish(), fingerprints.finish(), credentials.finish(), methods.finish(),
                          targets.finish(), headers.finish(), bodies.finish(), priorities.finish(), tags.finish(),
                          dependsOn.finish(), createdAt.finish(), laneRanks.finish(),
                          .text(state.status.rawValue), .int64(Int64(state.attempts)), .int64(Int64(state.retryCount))]
        }
    }

    /// Inserts the rows of `AddedRows` into lane `$2` of origin `$1` (a key already held inserts
    /// nothing), raises the lane's count by those inserted and answers their number (`n`), in
    /// one statement.
    static let addedRowsSQL = """
        WITH added AS (
            INSERT INTO requests (id, origin, lane, idempotency_key, fingerprint, credentials, method, target, headers, body,
                                  priority, tag, depends_on, created_at)
            SELECT a.id, $1::text, $2::text, a.idempotency_key, a.fingerprint, a.credentials, a.method, a.target, a.headers,
                   a.body, a.priority, a.tag, a.depends_on, a.created_at
              FROM unnest($3::uuid[], $4::text[], $5::bytea[], $6::bytea[], $7::text[], $8::text[], $9::jsonb[], $10::bytea[],
                          $11::smallint[], $12::text[], $13::uuid[], $14::bigint[])
                   AS a(id, idempotency_key, fingerprint, credentials, method, target, headers, body, priority, tag,
                        depends_on, created_at)
            ON CONFLICT (origin, idempotency_key) DO NOTHING
            RETURNING seq, id),
        -- The rank comes with the id it was computed for: RETURNING names only the new row.
        stated AS (
            INSERT INTO states (seq, origin, lane, status, lane_rank, attempts, retry_count)
            SELECT added.seq, $1::text, $2::text, $16::text, ranks.lane_rank, $17::integer, $18::integer
              FROM added JOIN unnest($3::uuid[], $15::smallint[]) AS ranks(id, lane_rank) ON ranks.id = added.id
            RETURNING 1),
        counted AS (SELECT count(*) AS n FROM stated)
        UPDATE lanes SET unfinished = lanes.unfinished + counted.n FROM counted
         WHERE lanes.origin = $1 AND lanes.lane = $2
        RETURNING counted.n AS n
        """

    /// The order in which a transaction takes a write's first lock: its lane.
    public static func lockOrder(_ request: OperationRequest) -> String {
        request.origin.description + "\u{0}" + (request.orderingKey ?? "")
    }

    /// The summaries of the operations of `origin` holding `keys`.
    static func byKeys(_ keys: [String], origin: String) -> Statement {
        ("SELECT \(summaryColumns) FROM operations WHERE origin = $1 AND idempotency_key = ANY($2::text[])",
         [.text(origin), .text(textArray(keys))])
    }

    /// `values` as a PostgreSQL text array literal, each element quoted (`"`, `\` escaped).
    static func textArray(_ values: [String]) -> String {
        "{" + values.map { value in
            "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }.joined(separator: ",") + "}"
    }

    /// Writes `state` as operation `id`'s latest, if its lane is held by `holder` under `fence`
    /// (`PostgresLanes`) and it is not finished yet; the lane stops counting it when `state`
    /// finishes it: `recordMany` of one write. The statement answers one row when the write
    /// took place, none when the claim was lost or the operation had ended.
    public static func record(_ id: UUID, _ state: OperationState, priority: OperationPriority, instance: String,
                              holder: String, fence: Int64) -> [Statement] {
        recordMany([StateWrite(id: id, state: state, priority: priority, instance: instance, holder: holder, fence: fence)])
    }

    /// One fenced state write, for `recordMany`.
    public struct StateWrite: Sendable {
        public let id: UUID
        public let state: OperationState
        public let priority: OperationPriority
        public let instance: String
        public let holder: String
        public let fence: Int64

        public init(id: UUID, state: OperationState, priority: OperationPriority, instance: String, holder: String, fence: Int64) {
            self.id = id
            self.state = state
            self.priority = priority
            self.instance = instance
            self.holder = holder
            self.fence = fence
        }
    }

    /// Fenced state writes for several operations (none twice) in one statement: each row is
    /// written if its lane is held under its fence and it is unfinished; the lanes stop counting
    /// those it finishes. Answers the ids written, one row each. The rows go as one binary array per
    /// column (`PostgresArray`): one prepared text for any number of rows.
    public static func recordMany(_ writes: [StateWrite]) -> [Statement] {
        var ids = PostgresArray(of: .uuid), statuses = PostgresArray(of: .text), laneRanks = PostgresArray(of: .int2)
        var attempts = PostgresArray(of: .int4), retryCounts = PostgresArray(of: .int4), lastAttempts = PostgresArray(of: .int8)
        var nextAttempts = PostgresArray(of: .int8), lastErrors = PostgresArray(of: .text), instances = PostgresArray(of: .text)
        var responses = AnswerArrays(), conflicts = AnswerArrays()
        var finishedAt = PostgresArray(of: .int8), holders = PostgresArray(of: .text), fences = PostgresArray(of: .int8)
        for write in writes {
            let state = write.state
            ids.append(uuid: write.id)
            statuses.append(text: state.status.rawValue)
            laneRanks.append(int2: Int16(write.priority.laneRank(attempted: state.attempts > 0)))
            attempts.append(int4: Int32(clamping: state.attempts))
            retryCounts.append(int4: Int32(clamping: state.retryCount))
            lastAttempts.append(int8: state.lastAttemptAt)
            nextAttempts.append(int8: state.nextAttemptAt)
            lastErrors.append(text: state.lastError)
            instances.append(text: write.instance)
            responses.append(state.response)
            conflicts.append(state.conflict)
            finishedAt.append(int8: state.status.isFinished ? state.lastAttemptAt ?? WallClock.millis() : nil)
            holders.append(text: write.holder)
            fences.append(int8: write.fence)
        }
        return [(recordManySQL, [ids.finish(), statuses.finish(), laneRanks.finish(), attempts.finish(), retryCounts.finish(),
                                 lastAttempts.finish(), nextAttempts.finish(), lastErrors.finish(), instances.finish()]
                    + responses.finish() + conflicts.finish() + [finishedAt.finish(), holders.finish(), fences.finish()])]
    }

    /// A stored answer's four columns (`response_*` or `conflict_*`) as arrays, NULL where none.
    private struct AnswerArrays {
        var statuses = PostgresArray(of: .int4), headers = PostgresArray(of: .jsonb)
        var bodies = PostgresArray(of: .bytea), omitted = PostgresArray(of: .int8)

        mutating func append(_ answer: StoredResponse?) {
            guard let answer else {
                statuses.appendNull()
                headers.appendNull()
                bodies.appendNull()
                omitted.appendNull()
                return
            }
            statuses.append(int4: Int32(clamping: answer.status))
            headers.append(jsonbWrittenBy: { appendHeadersJSON(answer.headers, to: &$0) })
            bodies.append(bytes: answer.body)
            omitted.append(int8: answer.omittedBodySize.map(Int64.init))
        }

        mutating func finish() -> [PostgresValue] { [statuses.finish(), headers.finish(), bodies.finish(), omitted.finish()] }
    }

    static let recordManySQL: String = """
        WITH v AS (
            SELECT * FROM unnest($1::uuid[], $2::text[], $3::smallint[], $4::integer[], $5::integer[], $6::bigint[],
                                 $7::bigint[], $8::text[], $9::text[], $10::integer[], $11::jsonb[], $12::bytea[], $13::bigint[],
                                 $14::integer[], $15::jsonb[], $16::bytea[], $17::bigint[], $18::bigint[], $19::text[], $20::bigint[])
                AS v(id, status, lane_rank, attempts, retry_count, last_attempt_at, next_attempt_at, last_error, instance,
                     response_status, response_headers, response_body, response_omitted,
                     conflict_status, conflict_headers, conflict_body, conflict_omitted, finished_at, holder, fence)),
        -- Each operation's state and lane, by its id.
        targets AS (SELECT v.*, r.seq, r.origin, r.lane FROM v JOIN requests r ON r.id = v.id),
        -- Their lanes' rows, locked in the one order before any of their states is written (a
        -- claim taking a lane over locks its row, then its states: the other way round, the two
        -- could each hold what the other waits for), and read as they are now, latest commit
        -- included, for the fence.
        ordered AS (\(PostgresLanes.lockedInOrder(keysIn: "targets"))),
        changed AS (
            UPDATE states s SET status = t.status, lane_rank = t.lane_rank, attempts = t.attempts,
                   retry_count = t.retry_count, last_attempt_at = t.last_attempt_at, next_attempt_at = t.next_attempt_at,
                   last_error = t.last_error, instance = t.instance,
                   response_status = t.response_status, response_headers = t.response_headers,
                   response_body = t.response_body, response_omitted = t.response_omitted,
                   conflict_status = t.conflict_status, conflict_headers = t.conflict_headers,
                   conflict_body = t.conflict_body, conflict_omitted = t.conflict_omitted, finished_at = t.finished_at
              FROM targets t JOIN ordered k ON k.origin = t.origin AND k.lane = t.lane
             WHERE s.seq = t.seq AND s.status IN ('pending', 'inProgress') AND k.holder = t.holder AND k.fence = t.fence
            RETURNING t.id, s.origin, s.lane, t.finished_at IS NOT NULL AS finished),
        counted AS (
            SELECT origin, lane, count(*) AS n FROM changed WHERE finished GROUP BY origin, lane),
        counts AS (
            UPDATE lanes l SET unfinished = l.unfinished - counted.n FROM counted
             WHERE l.origin = counted.origin AND l.lane = counted.lane)
        SELECT id::text AS id FROM changed
        """

    // MARK: - Reads

    /// The summary of the operation of `origin` that holds `key`.
    public static func byKey(_ key: String, origin: Origin) -> Statement {
        ("SELECT \(summaryColumns) FROM operations WHERE origin = $1 AND idempotency_key = $2",
         [.text(origin.description), .text(key)])
    }

    /// The summary of the operation a lane delivers next: its attempted head, else the first of
    /// the highest priority.
    public static func nextInLane(origin: Origin, orderingKey: String?) -> Statement {
        ("""
         SELECT \(summaryColumns(requests: "r.")) FROM \(joined) WHERE s.origin = $1 AND s.lane = $2 AND \(unfinished)
          ORDER BY lane_rank DESC, s.seq LIMIT 1
         """, [.text(origin.description), .text(orderingKey ?? "")])
    }

    /// Up to `limit` summaries with `status`, in arrival order after `afterSeq`.
    public static func list(status: OperationStatus, afterSeq: Int64 = 0, limit: Int) -> Statement {
        ("SELECT \(summaryColumns) FROM operations WHERE status = $1 AND seq > $2 ORDER BY seq LIMIT $3",
         [.text(status.rawValue), .int64(afterSeq), .int64(Int64(limit))])
    }

    /// The whole operation `id`: summary, headers, body and stored answers.
    public static func whole(_ id: UUID) -> Statement {
        ("SELECT \(summaryColumns), headers::text AS headers, body, \(answerColumns) FROM operations WHERE id = $1::uuid",
         [.text(id.lowercasedText)])
    }

    /// Row `row` of a summary read: the snapshot without stored answers (as the local index
    /// gives listings), with the instance of its last attempt.
    public static func summary(_ result: PostgresResult, row: Int) throws(DecodeError) -> Row {
        func text(_ column: String) throws(DecodeError) -> String {
            guard let value = result.value(row, column) else { throw DecodeError(column: column, value: nil) }
            return value
        }
        func number(_ column: String) throws(DecodeError) -> Int64 {
            guard let value = Int64(try text(column)) else { throw DecodeError(column: column, value: result.value(row, column)) }
            return value
        }
        func optionalNumber(_ column: String) throws(DecodeError) -> Int64? {
            guard let value = result.value(row, column) else { return nil }
            guard let number = Int64(value) else { throw DecodeError(column: column, value: value) }
            return number
        }
        func bytes(_ column: String) throws(DecodeError) -> [UInt8] {
            guard let value = result.bytes(row, column) else { throw DecodeError(column: column, value: result.value(row, column)) }
            return value
        }
        let originText = try text("origin")
        guard let origin = PostgresRowText.origin(originText) else { throw DecodeError(column: "origin", value: originText) }
        guard let id = UUID(uuidString: try text("id")) else { throw DecodeError(column: "id", value: result.value(row, "id")) }
        let dependsOn = try result.value(row, "depends_on").map { value throws(DecodeError) -> UUID in
            guard let uuid = UUID(uuidString: value) else { throw DecodeError(column: "depends_on", value: value) }
            return uuid
        }
        guard let priority = OperationPriority(rawValue: Int(try number("priority"))) else {
            throw DecodeError(column: "priority", value: result.value(row, "priority"))
        }
        guard let status = OperationStatus(rawValue: try text("status")) else {
            throw DecodeError(column: "status", value: result.value(row, "status"))
        }
        let lane = try text("lane")
        let state = OperationState(status: status, retryCount: Int(try number("retry_count")),
                                   lastAttemptAt: try optionalNumber("last_attempt_at"),
                                   nextAttemptAt: try optionalNumber("next_attempt_at"), lastError: result.value(row, "last_error"),
                                   attempts: Int(try number("attempts")))
        let snapshot = OperationSnapshot(id: id, origin: origin, method: try text("method"), target: try text("target"),
                                         idempotencyKey: try text("idempotency_key"), fingerprint: try bytes("fingerprint"),
                                         priority: priority, tag: result.value(row, "tag"), dependsOn: dependsOn,
                                         createdAt: try number("created_at"), orderingKey: lane.isEmpty ? nil : lane,
                                         credentials: try bytes("credentials"), state: state)
        return Row(seq: try number("seq"), snapshot: snapshot, instance: result.value(row, "instance"))
    }

    /// Row `row` of a `whole` read: the request as it is replayed and the full latest state.
    public static func whole(_ result: PostgresResult, row: Int) throws(DecodeError) -> (Row, OperationRequest) {
        let summary = try summary(result, row: row)
        let snapshot = summary.snapshot
        guard let headersText = result.value(row, "headers"), let headers = headers(fromJSON: headersText) else {
            throw DecodeError(column: "headers", value: result.value(row, "headers"))
        }
        guard let body = result.bytes(row, "body") else { throw DecodeError(column: "body", value: result.value(row, "body")) }
        var state = snapshot.state
        state.response = try answer(result, row: row, prefix: "response")
        state.conflict = try answer(result, row: row, prefix: "conflict")
        var whole = snapshot
        whole.state = state
        let request = OperationRequest(id: snapshot.id, origin: snapshot.origin, method: snapshot.method, target: snapshot.target,
                                       headers: headers, body: body, idempotencyKey: snapshot.idempotencyKey,
                                       fingerprint: snapshot.fingerprint, priority: snapshot.priority, tag: snapshot.tag,
                                       dependsOn: snapshot.dependsOn, createdAt: snapshot.createdAt,
                                       orderingKey: snapshot.orderingKey, credentials: snapshot.credentials)
        return (Row(seq: summary.seq, snapshot: whole, instance: summary.instance), request)
    }

    // MARK: - Values

    package static func headersJSON(_ headers: HTTPHeaders) -> String {
        var out: [UInt8] = []
        appendHeadersJSON(headers, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `headersJSON` written into `out`: once per stored request and per outcome, so without a
    /// `JSON` tree or a `String` of its own.
    static func appendHeadersJSON(_ headers: HTTPHeaders, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        var first = true
        for field in headers {
            if !first { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "["))
            first = false
            JSON.appendQuoted(field.name, to: &out)
            out.append(UInt8(ascii: ","))
            JSON.appendQuoted(field.value, to: &out)
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "]"))
    }

    /// Headers from the text of their JSON array (the one-pass reader first).
    static func headers(fromJSON text: String) -> HTTPHeaders? { PostgresRowText.headers(text) }

    /// `headers(fromJSON:)` by the general JSON reader: any valid JSON of that shape.
    package static func headersReadAsJSON(_ text: String) -> HTTPHeaders? {
        guard let pairs = (try? JSONReader.parse(Array(text.utf8)))?.arrayValue else { return nil }
        var fields: [(name: String, value: String)] = []
        fields.reserveCapacity(pairs.count)
        for pair in pairs {
            guard let items = pair.arrayValue, items.count == 2, let name = items[0].stringValue, let value = items[1].stringValue else {
                return nil
            }
            fields.append((name, value))
        }
        return HTTPHeaders(fields)
    }


    static func answer(_ result: PostgresResult, row: Int, prefix: String) throws(DecodeError) -> StoredResponse? {
        guard let statusText = result.value(row, prefix + "_status") else { return nil }
        guard let status = Int(statusText) else { throw DecodeError(column: prefix + "_status", value: statusText) }
        guard let headersText = result.value(row, prefix + "_headers"), let headers = headers(fromJSON: headersText) else {
            throw DecodeError(column: prefix + "_headers", value: result.value(row, prefix + "_headers"))
        }
        guard let body = result.bytes(row, prefix + "_body") else {
            throw DecodeError(column: prefix + "_body", value: result.value(row, prefix + "_body"))
        }
        let omitted = result.value(row, prefix + "_omitted")
        return StoredResponse(status: status, headers: headers, body: body, omittedBodySize: omitted.flatMap { Int($0) })
    }
}

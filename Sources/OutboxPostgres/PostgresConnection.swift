import CLibPQ
import Glibc
import OutboxModel

/// What a statement failed with: PostgreSQL's SQLSTATE when the server answered (class `53`
/// is out of space, `57014` a statement timeout, `23505` a unique violation), nil when the
/// connection itself failed (refused, dropped, timed out). The message is libpq's, with no
/// password in it: libpq never prints one.
public struct PostgresError: Error, Equatable, CustomStringConvertible {
    public let sqlState: String?
    public let message: String

    public init(sqlState: String?, message: String) {
        self.sqlState = sqlState
        self.message = message
    }

    /// The connection is gone or unusable: reconnect, the statement may not have run.
    public var isConnectionFailure: Bool { sqlState == nil || sqlState?.hasPrefix("08") == true }
    public var isOutOfSpace: Bool { sqlState?.hasPrefix("53") == true }
    public var description: String { sqlState.map { "\($0): \(message)" } ?? message }
}

/// One parameter of a statement, sent in libpq's binary format for bytes and as text
/// otherwise (PostgreSQL casts text to the column's type).
public enum PostgresValue: Sendable, Equatable {
    case text(String)
    case bytes([UInt8])
    case int64(Int64)
    case null
}

/// The rows of one statement, every value as text or nil for NULL (`bytea` comes back in
/// PostgreSQL's hex form: `bytes(row:column:)` decodes it).
public struct PostgresResult: Sendable {
    public let columns: [String]
    /// Every value as text; a `bytea` value (decoded once into `decoded`) as `\x` alone, its
    /// bytes never kept twice.
    public let rows: [[String?]]
    /// Rows a command touched (`INSERT 0 3` → 3), 0 for one that names none.
    public let affected: Int
    /// The `bytea` values, decoded from libpq's hex as the result was read, by row and column.
    let decoded: [Int: [[UInt8]?]]

    init(columns: [String], rows: [[String?]], affected: Int, decoded: [Int: [[UInt8]?]] = [:]) {
        self.columns = columns
        self.rows = rows
        self.affected = affected
        self.decoded = decoded
    }

    /// The value at `row` of `column`; nil for NULL, an unknown column or a row past the end.
    public func value(_ row: Int, _ column: String) -> String? {
        guard rows.indices.contains(row), let index = columns.firstIndex(of: column) else { return nil }
        return rows[row][index]
    }

    /// The result with only the rows whose `column` holds `value` (the first of them).
    public func only(where column: String, is value: String) -> PostgresResult {
        guard let index = columns.firstIndex(of: column), let row = rows.firstIndex(where: { $0[index] == value }) else {
            return PostgresResult(columns: columns, rows: [], affected: 0)
        }
        return PostgresResult(columns: columns, rows: [rows[row]], affected: 1, decoded: decoded.mapValues { [$0[row]] })
    }

    /// A `bytea` value in hex form (`\x6869`) as bytes; nil for NULL or another form.
    public func bytes(_ row: Int, _ column: String) -> [UInt8]? {
        guard rows.indices.contains(row), let index = columns.firstIndex(of: column) else { return nil }
        if let values = decoded[index] { return values[row] }
        guard let text = rows[row][index] else { return nil }
        return Array(text.utf8).withUnsafeBufferPointer { Self.hex($0) }
    }

    /// `\x6869` (libpq's text form of `bytea`) as bytes; nil for another form.
    static func hex(_ text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard text.count >= 2, text[0] == UInt8(ascii: "\\"), text[1] == UInt8(ascii: "x"), text.count % 2 == 0 else { return nil }
        return [UInt8](unsafeUninitializedCapacity: (text.count - 2) / 2) { out, count in
            var index = 2
            while index < text.count {
                guard let high = nibble(text[index]), let low = nibble(text[index + 1]) else {
                    count = 0
                    return
                }
                out[count] = high << 4 | low
                count += 1
                index += 2
            }
        }.nilIfShort(of: (text.count - 2) / 2)
    }

    fileprivate static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// One libpq connection in non-blocking mode, driven with `poll(2)` on its socket so that every
/// wait has a deadline: connecting, sending, and reading results. Its methods block the
/// calling thread until the answer or the deadline, so it is used from one `PostgresThread`,
/// never from an event loop or Swift's cooperative pool. Not thread-safe: one owner at a time.
public final class PostgresConnection {
    private var connection: OpaquePointer?
    /// The statements this connection has prepared, by their text: the store sends the same few
    /// statements thousands of times, and parsing and planning each again cost more than running
    /// it. Bounded: texts past `maxPrepared` (multi-row inserts of every size) run unprepared.
    private var prepared: [String: String] = [:]
    static let maxPrepared = 256
    /// Statements with more parameters than this are not prepared: each such text (a multi-row
    /// insert) is rarely sent twice.
    static let maxPreparedParameters = 64
    /// How long one call may wait for the server before it fails with a connection error and
    /// the connection is closed (the statement may or may not have run).
    public let timeoutSeconds: Double

    /// Connects to `conninfo` (a `postgresql://` URI or `key=value` pairs; libpq fills what it
    /// leaves out from `PG*` variables and `~/.pgpass`) within `timeoutSeconds`.
    public init(_ conninfo: String, timeoutSeconds: Double = 10) throws(PostgresError) {
        self.timeoutSeconds = timeoutSeconds
        guard let conn = PQconnectStart(conninfo) else {
            throw PostgresError(sqlState: nil, message: "libpq could not allocate a connection")
        }
        connection = conn
        let deadline = Deadline(seconds: timeoutSeconds)
        var status = PGRES_POLLING_WRITING
        while true {
            if PQstatus(conn) == CONNECTION_BAD { throw fail() }
            switch status {
            case PGRES_POLLING_OK:
                guard PQsetnonblocking(conn, 1) == 0 else { throw fail() }
                // libpq prints the server's notices (`relation … already exists, skipping`) on
                // stderr by default, between the log's lines: they are dropped instead.
                PQsetNoticeProcessor(conn, { _, _ in }, nil)
                return
            case PGRES_POLLING_FAILED:
                throw fail()
            case PGRES_POLLING_READING:
                try wait(read: true, write: false, until: deadline, doing: "connecting")
            default:
                try wait(read: false, write: true, until: deadline, doing: "connecting")
            }
            status = PQconnectPoll(conn)
        }
    }

    deinit { close() }

    public func close() {
        if let connection { PQfinish(connection) }
        connection = nil
    }

    public var isOpen: Bool { connection.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// A transaction is open on the connection (begun, or failed and not yet rolled back).
    public var inTransaction: Bool {
        guard let connection else { return false }
        let status = PQtransactionStatus(connection)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    /// The server's version as libpq reports it (150018 for 15.18).
    public var serverVersion: Int { connection.map { Int(PQserverVersion($0)) } ?? 0 }

    /// Runs one statement with `$1…` parameters and returns its rows; in `binary`, see
    /// `pipeline`.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [PostgresValue] = [],
                        binary: Bool = false) throws(PostgresError) -> PostgresResult {
        try pipeline([(sql, parameters)], binary: binary)[0]
    }

    /// Runs one statement, in a transaction of its own, with the plan its prepared form gets
    /// once for any values (`plan_cache_mode = force_generic_plan` for that transaction) where
    /// the connection plans each execution for its values: for a statement whose plan does not
    /// depend on them, planning it each time costs more than running it. One round trip.
    public func executePlannedOnce(_ sql: String, _ parameters: [PostgresValue] = [],
                                   binary: Bool = false) throws(PostgresError) -> PostgresResult {
        try pipeline(Self.beginPlannedOnce + [(sql, parameters), ("COMMIT", [])], binary: binary)[Self.beginPlannedOnce.count]
    }

    /// Opens a transaction whose prepared statements run with the plan each gets once for any
    /// values, on a connection that plans each execution for its values.
    public static let beginPlannedOnce: [(String, [PostgresValue])] = [
        ("BEGIN", []), ("SET LOCAL plan_cache_mode = force_generic_plan", []),
    ]

    /// Sends every statement before reading any answer (libpq's pipeline mode: one round trip
    /// for all of them) and returns their results in order. The first statement that fails
    /// makes the server skip the rest up to the end of the pipeline; that failure is thrown.
    /// Wrapped in `BEGIN` … `COMMIT` by the caller, the statements share one commit: group
    /// commit, one WAL flush for every write of the batch.
    ///
    /// `binary` asks for the results in PostgreSQL's binary format: a `bytea` value comes as its
    /// bytes, not as hex text twice its size that the server encodes and this decodes (a look
    /// ahead's bodies). The result reads the same (`PostgresResult`), for the types it knows in
    /// that format: `text`, `varchar`, `bytea`, `jsonb`, `uuid`, `bool` and the integers; a
    /// column of another type reads as NULL, so such a statement casts it to `text`.
    public func pipeline(_ statements: [(String, [PostgresValue])], binary: Bool = false) throws(PostgresError) -> [PostgresResult] {
        guard let conn = connection, PQstatus(conn) == CONNECTION_OK else {
            throw PostgresError(sqlState: nil, message: "the connection is closed")
        }
        let deadline = Deadline(seconds: timeoutSeconds)
        guard PQenterPipelineMode(conn) == 1 else { throw fail() }
        // Which results are a PREPARE's own (not a statement's), in the order they come.
        var isPrepare: [Bool] = []
        isPrepare.reserveCapacity(statements.count + 4)
        var preparing: [(sql: String, name: String)] = []
        for (sql, parameters) in statements {
            if let name = prepared[sql] ?? preparing.first(where: { $0.sql == sql })?.name {
                guard Self.sendPrepared(conn, name, parameters, binary: binary) == 1 else { throw fail() }
            } else if prepared.count + burnedNames + preparing.count < Self.maxPrepared, parameters.count <= Self.maxPreparedParameters,
                      !sql.hasPrefix("BEGIN"), !sql.hasPrefix("COMMIT") {
                let name = "s\(prepared.count + burnedNames + preparing.count)"
                guard PQsendPrepare(conn, name, sql, Int32(parameters.count), nil) == 1 else { throw fail() }
                isPrepare.append(true)
                preparing.append((sql, name))
                guard Self.sendPrepared(conn, name, parameters, binary: binary) == 1 else { throw fail() }
            } else {
                guard Self.send(conn, sql, parameters, binary: binary) == 1 else { throw fail() }
            }
            isPrepare.append(false)
        }
        guard PQpipelineSync(conn) == 1 else { throw fail() }
        try flush(until: deadline)

        var results: [PostgresResult] = []
        var firstError: PostgresError?
        var failedPrepare = false
        var position = 0
        // Each statement's result, then a NULL; after the last one, the sync's own result.
        while true {
            guard let result = try nextResult(until: deadline) else {
                // The NULL after each statement's results.
                continue
            }
            defer { PQclear(result) }
            let status = PQresultStatus(result)
            if status == PGRES_PIPELINE_SYNC { break }
            let ofPrepare = position < isPrepare.count && isPrepare[position]
            position += 1
            switch status {
            case PGRES_TUPLES_OK, PGRES_COMMAND_OK:
                if !ofPrepare { results.append(Self.rows(of: result)) }
            case PGRES_PIPELINE_ABORTED:
                if ofPrepare { failedPrepare = true }
            default:
                if ofPrepare { failedPrepare = true }
                if firstError == nil { firstError = Self.error(of: result) }
            }
        }
        guard PQexitPipelineMode(conn) == 1 else { throw fail() }
        // A statement is known prepared only once its PREPARE succeeded: after a failure the
        // server may hold some of them, so the names of this pipeline are not used again.
        if !failedPrepare {
            for (sql, name) in preparing { prepared[sql] = name }
        } else {
            burnedNames += preparing.count
        }
        if let firstError { throw endingFailedTransaction(firstError) }
        return results
    }

    /// Runs a script of several statements separated by `;` (the simple query protocol, which
    /// a pipeline cannot carry): a migration. Statements after the first failure are not run;
    /// inside a transaction the failure rolls it back, and the failure is thrown.
    /// `timeoutSeconds`, when given, bounds this script instead of the connection's own bound: a
    /// migration that copies a large queue's rows runs longer than any one statement should.
    public func executeScript(_ sql: String, timeoutSeconds: Double? = nil) throws(PostgresError) {
        guard let conn = connection, PQstatus(conn) == CONNECTION_OK else {
            throw PostgresError(sqlState: nil, message: "the connection is closed")
        }
        let deadline = Deadline(seconds: timeoutSeconds ?? self.timeoutSeconds)
        guard PQsendQuery(conn, sql) == 1 else { throw fail() }
        try flush(until: deadline)
        var firstError: PostgresError?
        while let result = try nextResult(until: deadline) {
            defer { PQclear(result) }
            let status = PQresultStatus(result)
            if status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK && firstError == nil { firstError = Self.error(of: result) }
        }
        if let firstError { throw endingFailedTransaction(firstError) }
    }

    /// `error`, after rolling back the transaction it left aborted: a failed statement inside
    /// `BEGIN` aborts it, and the `COMMIT` the server then skipped did not end it, so the next
    /// statement would fail too.
    private func endingFailedTransaction(_ error: PostgresError) -> PostgresError {
        if let connection, PQtransactionStatus(connection) == PQTRANS_INERROR { _ = try? pipeline([("ROLLBACK", [])]) }
        return error
    }

    // MARK: - I/O with deadlines

    /// Prepared names given out in pipelines that failed: never reused (the server may hold them).
    private var burnedNames = 0

    private static func sendPrepared(_ conn: OpaquePointer, _ name: String, _ parameters: [PostgresValue], binary: Bool) -> Int32 {
        withParameters(parameters) { count, values, lengths, formats in
            PQsendQueryPrepared(conn, name, count, values, lengths, formats, binary ? 1 : 0)
        }
    }

    private static func send(_ conn: OpaquePointer, _ sql: String, _ parameters: [PostgresValue], binary: Bool) -> Int32 {
        withParameters(parameters) { count, values, lengths, formats in
            PQsendQueryParams(conn, sql, count, nil, values, lengths, formats, binary ? 1 : 0)
        }
    }

    private static func withParameters(_ parameters: [PostgresValue],
                                       _ body: (Int32, [UnsafePointer<CChar>?], [Int32], [Int32]) -> Int32) -> Int32 {
        // Every parameter's bytes in one buffer (text NUL-terminated, bytes as they are, in
        // libpq's binary format 1), so one pointer into it serves them all for the call.
        var buffer: [UInt8] = []
        var offsets: [Int] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        offsets.reserveCapacity(parameters.count)
        lengths.reserveCapacity(parameters.count)
        formats.reserveCapacity(parameters.count)
        for parameter in parameters {
            offsets.append(buffer.count)
            switch parameter {
            case .text(let text): buffer.append(contentsOf: text.utf8); buffer.append(0); lengths.append(0); formats.append(0)
            case .int64(let value): buffer.append(contentsOf: String(value).utf8); buffer.append(0); lengths.append(0); formats.append(0)
            case .bytes(let bytes): buffer.append(contentsOf: bytes); lengths.append(Int32(bytes.count)); formats.append(1)
            case .null: offsets[offsets.count - 1] = -1; lengths.append(0); formats.append(0)
            }
        }
        buffer.append(0)  // an empty last value still points inside the buffer
        return buffer.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { chars in
                let base = chars.baseAddress
                let values: [UnsafePointer<CChar>?] = offsets.map { offset in offset < 0 ? nil : base.map { $0 + offset } }
                return body(Int32(parameters.count), values, lengths, formats)
            }
        }
    }

    private func flush(until deadline: Deadline) throws(PostgresError) {
        guard let conn = connection else { throw PostgresError(sqlState: nil, message: "the connection is closed") }
        while true {
            let left = PQflush(conn)
            if left == 0 { return }
            if left < 0 { throw fail() }
            // The server may be waiting for us to read its answers before it reads more.
            try wait(read: true, write: true, until: deadline, doing: "sending")
            guard PQconsumeInput(conn) == 1 else { throw fail() }
        }
    }

    /// The next result, or nil for the NULL that ends a statement's results.
    private func nextResult(until deadline: Deadline) throws(PostgresError) -> OpaquePointer? {
        guard let conn = connection else { throw PostgresError(sqlState: nil, message: "the connection is closed") }
        while PQisBusy(conn) == 1 {
            try wait(read: true, write: false, until: deadline, doing: "waiting for the server's answer")
            guard PQconsumeInput(conn) == 1 else { throw fail() }
        }
        return PQgetResult(conn)
    }

    private func wait(read: Bool, write: Bool, until deadline: Deadline, doing what: String) throws(PostgresError) {
        guard let conn = connection else { throw PostgresError(sqlState: nil, message: "the connection is closed") }
        let socket = PQsocket(conn)
        guard socket >= 0 else { throw fail() }
        while true {
            let left = deadline.at - Self.now()
            guard left > 0 else {
                close()
                throw PostgresError(sqlState: nil, message: "no answer from the server within \(deadline.seconds) s while \(what)")
            }
            var events: Int16 = 0
            if read { events |= Int16(POLLIN) }
            if write { events |= Int16(POLLOUT) }
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(left * 1000, 1000).rounded(.up)))
            if ready > 0 { return }
            if ready < 0 && errno != EINTR {
                throw PostgresError(sqlState: nil, message: "poll: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// The connection's error, and the connection closed when it is broken.
    private func fail() -> PostgresError {
        let message = connection.flatMap { PQerrorMessage($0) }.map { String(cString: $0) } ?? "unknown libpq error"
        if let conn = connection, PQstatus(conn) == CONNECTION_BAD { close() }
        return PostgresError(sqlState: nil, message: Self.trimmed(message))
    }

    private static func error(of result: OpaquePointer) -> PostgresError {
        let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        let message = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
            ?? String(cString: PQresultErrorMessage(result))
        return PostgresError(sqlState: state, message: trimmed(message))
    }

    private static func rows(of result: OpaquePointer) -> PostgresResult {
        let columnCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        let columns = (0..<columnCount).map { String(cString: PQfname(result, Int32($0))) }
        let types = (0..<columnCount).map { PQftype(result, Int32($0)) }
        let binary = (0..<columnCount).map { PQfformat(result, Int32($0)) == 1 }
        func value(_ row: Int, _ column: Int) -> UnsafeBufferPointer<UInt8>? {
            guard PQgetisnull(result, Int32(row), Int32(column)) == 0, let value = PQgetvalue(result, Int32(row), Int32(column))
            else { return nil }
            let length = Int(PQgetlength(result, Int32(row), Int32(column)))
            return value.withMemoryRebound(to: UInt8.self, capacity: length) { UnsafeBufferPointer(start: $0, count: length) }
        }
        // bytea is decoded straight from libpq's buffer: a body is never a String.
        let byteColumns = Set((0..<columnCount).filter { types[$0] == PostgresBinary.bytea })
        var decoded: [Int: [[UInt8]?]] = [:]
        for column in byteColumns {
            decoded[column] = (0..<rowCount).map { row -> [UInt8]? in
                guard let bytes = value(row, column) else { return nil }
                return binary[column] ? Array(bytes) : PostgresResult.hex(bytes)
            }
        }
        let rows: [[String?]] = (0..<rowCount).map { row in
            (0..<columnCount).map { column in
                guard let bytes = value(row, column) else { return nil }
                if byteColumns.contains(column) { return "\\x" }
                return binary[column] ? PostgresBinary.text(bytes, type: types[column]) : String(decoding: bytes, as: UTF8.self)
            }
        }
        return PostgresResult(columns: columns, rows: rows, affected: Int(String(cString: PQcmdTuples(result))) ?? 0, decoded: decoded)
    }

    private static func trimmed(_ message: String) -> String {
        var text = Substring(message)
        while let last = text.last, last.isWhitespace { text = text.dropLast() }
        return text.split(separator: "\n").joined(separator: "; ")
    }

    /// Monotonic seconds, for deadlines and durations.
    static func now() -> Double { Double(MonotonicClock.nanos()) / 1e9 }

    /// When a wait for the server ends (monotonic seconds), and its length, for the message.
    private struct Deadline {
        let seconds: Double
        let at: Double

        init(seconds: Double) {
            self.seconds = seconds
            at = PostgresConnection.now() + seconds
        }
    }
}

extension Array {
    /// Nil unless the array holds `count` elements (a decode that stopped early).
    fileprivate func nilIfShort(of count: Int) -> Self? { self.count == count ? self : nil }
}

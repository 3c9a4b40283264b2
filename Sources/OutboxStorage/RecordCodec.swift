import Foundation
import OutboxHTTP
import OutboxModel

/// Encodes `LogRecord`s into frames and decodes them back, with our own compact binary format
/// (no Codable: this is the hot path of every durable append). Fields recovery needs come
/// first, headers and bodies last, so recovery reads a summary without touching the bodies.
/// The payload layouts are drawn in `docs/storage.md`.
enum RecordCodec {
    /// A CRC-valid record whose payload does not parse (a bug or a newer format).
    struct Malformed: Error {}

    // MARK: encoding

    /// The size of `record`'s whole frame, measured without writing it.
    static func frameSize(_ record: LogRecord) -> Int {
        var counter = ByteCounter()
        writePayload(record, into: &counter)
        return RecordFrame.headerSize + counter.count
    }

    /// Writes `record`'s frame into `frame`, which must be exactly ``frameSize(_:)`` bytes,
    /// sealed but not yet placed (``RecordFrame/place(_:segment:offset:)``: the writer does that).
    /// Throws only when a spilled body could not be read back: `frame` then holds no record.
    static func encode(_ record: LogRecord, into frame: UnsafeMutableRawBufferPointer) throws(StorageError) {
        var writer = ByteWriter(frame, at: RecordFrame.headerSize)
        writePayload(record, into: &writer)
        precondition(writer.count == frame.count, "record encoding wrote \(writer.count) of its measured \(frame.count) bytes")
        if let failure = writer.spillFailure { throw .io("\(failure)") }
        RecordFrame.seal(frame, type: recordType(record).rawValue)
    }

    private static func recordType(_ record: LogRecord) -> RecordFrame.RecordType {
        switch record {
        case .created: .created
        case .updated: .updated
        case .deleted: .deleted
        }
    }

    /// The payload of `record` (its type goes in the frame's header).
    private static func writePayload<Sink: ByteSink>(_ record: LogRecord, into writer: inout Sink) {
        switch record {
        case .created(let request, let state):
            writer.uuid(request.id)
            writer.i64(request.createdAt)
            writer.u8(UInt8(truncatingIfNeeded: request.priority.rawValue))
            // Bits 4 (ordering key) and 8 (credentials) came later: records written before them
            // have them clear, so they read back in the default lane, with the credentials their
            // stored headers hold, without a format version of their own.
            writer.u8((request.tag == nil ? 0 : 1) | (request.dependsOn == nil ? 0 : 2) | (request.orderingKey == nil ? 0 : 4)
                      | (request.credentials.isEmpty ? 0 : 8))
            if let dependsOn = request.dependsOn { writer.uuid(dependsOn) }
            writer.u8(request.origin.scheme == .https ? 1 : 0)
            writer.u16(UInt16(truncatingIfNeeded: request.origin.port))
            writer.string(request.origin.host)
            writer.string(request.method)
            writer.string(request.target)
            writer.string(request.idempotencyKey)
            writer.blob(request.fingerprint)
            if let tag = request.tag { writer.string(tag) }
            if let orderingKey = request.orderingKey { writer.string(orderingKey) }
            if !request.credentials.isEmpty { writer.blob(request.credentials) }
            writer.u32(UInt32(truncatingIfNeeded: request.bodyCount))
            writeLightState(state, into: &writer)
            writeHeaders(request.headers, into: &writer)
            // A spilled body goes from its file into the frame: the same bytes as an array's.
            if let spilled = request.spilledBody { writer.blob(spilled) } else { writer.blob(request.body) }
            writeHeavyState(state, into: &writer)
        case .updated(let id, let state):
            writer.uuid(id)
            writeLightState(state, into: &writer)
            writeHeavyState(state, into: &writer)
        case .deleted(let id):
            writer.uuid(id)
        }
    }

    private static func writeLightState<Sink: ByteSink>(_ state: OperationState, into writer: inout Sink) {
        writer.u8(statusCode(state.status))
        var flags: UInt8 = 0
        if state.lastAttemptAt != nil { flags |= 1 }
        if state.nextAttemptAt != nil { flags |= 2 }
        if state.lastError != nil { flags |= 4 }
        if state.response != nil { flags |= 8 }
        if state.conflict != nil { flags |= 16 }
        // Bits 32 and 64 came later: records written before them keep every body they hold.
        if state.response?.omittedBodySize != nil { flags |= 32 }
        if state.conflict?.omittedBodySize != nil { flags |= 64 }
        // Bit 128 (attempts) came later still, after every other light field: records written
        // before it read back with the count they implied (see `impliedAttempts`), so the field
        // is written only when it says something else; a `created` record (no attempt yet) is
        // written exactly as before.
        let attemptsWritten = state.attempts != impliedAttempts(state.status, retryCount: state.retryCount,
                                                                attempted: state.lastAttemptAt != nil)
        if attemptsWritten { flags |= 128 }
        writer.u8(flags)
        writer.i64(Int64(state.retryCount))
        if let lastAttemptAt = state.lastAttemptAt { writer.i64(lastAttemptAt) }
        if let nextAttemptAt = state.nextAttemptAt { writer.i64(nextAttemptAt) }
        if let lastError = state.lastError { writer.string(lastError) }
        if attemptsWritten { writer.u32(UInt32(clamping: state.attempts)) }
    }

    private static func writeHeavyState<Sink: ByteSink>(_ state: OperationState, into writer: inout Sink) {
        // One at a time, not a loop over a literal array: that array is an allocation per record.
        if let response = state.response { writeResponse(response, into: &writer) }
        if let conflict = state.conflict { writeResponse(conflict, into: &writer) }
    }

    /// Status, headers, then the body, or for an omitted one (its light-state bit set) its size.
    private static func writeResponse<Sink: ByteSink>(_ response: StoredResponse, into writer: inout Sink) {
        writer.u16(UInt16(clamping: response.status))
        writeHeaders(response.headers, into: &writer)
        if let omitted = response.omittedBodySize {
            writer.i64(Int64(omitted))
        } else {
            writer.blob(response.body)
        }
    }

    private static func writeHeaders<Sink: ByteSink>(_ headers: HTTPHeaders, into writer: inout Sink) {
        writer.u32(UInt32(truncatingIfNeeded: headers.fields.count))
        headers.storage.withUnsafeBytes { storage in
            for field in headers.fields {
                writer.u32(UInt32(truncatingIfNeeded: field.nameLength))
                writer.raw(UnsafeRawBufferPointer(rebasing: storage[field.nameRange]))
                writer.u32(UInt32(truncatingIfNeeded: field.valueLength))
                writer.raw(UnsafeRawBufferPointer(rebasing: storage[field.valueRange]))
            }
        }
    }

    // MARK: decoding

    /// Decodes the whole frame at `offset` of `segment` (as written by `encode` and placed there)
    /// after checking its header, length and checksum.
    static func decodeFrame(_ frame: UnsafeRawBufferPointer, segment: UInt32, offset: UInt64) throws(StorageError) -> LogRecord {
        guard frame.count >= RecordFrame.headerSize else { throw .corrupt("record shorter than its header") }
        guard case .frame(let type, let length, let checksum) = RecordFrame.readHeader(frame, segment: segment, offset: Int64(offset)) else {
            throw .corrupt("no record header at the location")
        }
        guard length == frame.count - RecordFrame.headerSize else { throw .corrupt("record length does not match its location") }
        let payload = UnsafeRawBufferPointer(rebasing: frame[RecordFrame.headerSize...])
        guard CRC32C.checksum(payload) == checksum else { throw .corrupt("record checksum mismatch") }
        do {
            return try decode(type: type, payload: payload)
        } catch {
            throw .corrupt("record payload does not parse")
        }
    }

    /// Decodes a checked payload in full (headers and bodies included).
    static func decode(type: UInt8, payload: UnsafeRawBufferPointer) throws(Malformed) -> LogRecord {
        do {
            var reader = ByteReader(payload)
            switch RecordFrame.RecordType(rawValue: type) {
            case .created:
                let prefix = try decodeCreatedPrefix(&reader)
                let light = try decodeLightState(&reader)
                var state = light.state
                let headers = try decodeHeaders(&reader)
                let body = try reader.blob()
                try decodeHeavyState(&reader, light, into: &state)
                return .created(request(prefix, headers: headers, body: body), state)
            case .updated:
                let id = try reader.uuid()
                let light = try decodeLightState(&reader)
                var state = light.state
                try decodeHeavyState(&reader, light, into: &state)
                return .updated(id, state)
            case .deleted:
                return .deleted(try reader.uuid())
            case .padding, nil:
                throw Malformed()
            }
        } catch is ByteReader.OutOfBounds {
            throw Malformed()
        } catch {
            throw Malformed()
        }
    }

    private static func request(_ prefix: CreatedPrefix, headers: HTTPHeaders, body: [UInt8]) -> OperationRequest {
        let created = OperationSnapshot(
            id: prefix.id, origin: Origin(scheme: prefix.scheme, host: String(decoding: prefix.host, as: UTF8.self), port: prefix.port),
            method: String(decoding: prefix.method, as: UTF8.self), target: String(decoding: prefix.target, as: UTF8.self),
            idempotencyKey: String(decoding: prefix.idempotencyKey, as: UTF8.self), fingerprint: Array(prefix.fingerprint),
            priority: prefix.priority, tag: prefix.tag.map { String(decoding: $0, as: UTF8.self) }, dependsOn: prefix.dependsOn,
            createdAt: prefix.createdAt, orderingKey: prefix.orderingKey.map { String(decoding: $0, as: UTF8.self) },
            credentials: prefix.credentials.map(Array.init) ?? [], state: OperationState())
        return OperationRequest(created, headers: headers, body: body)
    }

    /// The request of a `created` record's payload without its body (left empty), and where
    /// the body's bytes are in the payload: decoded from the payload's first bytes, so that a
    /// view can read the body piece by piece. Nil when `payload` is a prefix (`isWhole` false)
    /// that ends before the body's length; throws when the bytes cannot be a `created` payload.
    static func decodeRequestHead(payload: UnsafeRawBufferPointer,
                                  isWhole: Bool) throws(Malformed) -> (request: OperationRequest, body: Range<Int>)? {
        var reader = ByteReader(payload)
        do {
            let prefix = try decodeCreatedPrefix(&reader)
            _ = try decodeLightState(&reader)
            let headers = try decodeHeaders(&reader)
            let length = Int(try reader.u32())
            let start = reader.position
            // The body and the state after it must fit in the payload; the caller knows its length.
            if isWhole { try reader.skip(length) }
            return (request(prefix, headers: headers, body: []), start..<(start + length))
        } catch {
            // A prefix may simply end too soon (a field's count checked against the bytes so far
            // included); only the whole payload tells.
            if isWhole { throw Malformed() }
            return nil
        }
    }

    /// What recovery keeps of a record: no headers, no bodies (the state only says which bodies
    /// there are).
    enum Summary {
        case created(OperationSnapshot)
        case updated(UUID, OperationState)
        case deleted(UUID)
    }

    /// Decodes only the fields that precede headers and bodies. `origins` shares one `Origin`
    /// value (and so its strings) between all operations of an origin.
    static func decodeSummary(type: UInt8, payload: UnsafeRawBufferPointer, origins: inout OriginTable,
                              requestFields: Bool = true) throws(Malformed) -> Summary {
        let location = RecordLocation(segment: 0, offset: 0, length: 0)
        let record = try decodeRecord(type: type, payload: payload, location: location, origins: &origins)
        switch record.kind {
        case .created:
            guard let snapshot = record.snapshot(requestFields: requestFields, withBodies: true) else { throw Malformed() }
            return .created(snapshot)
        case .updated:
            return .updated(record.id, record.state(withBodies: true))
        case .deleted:
            return .deleted(record.id)
        }
    }

    /// Decodes the fields that precede headers and bodies into a record whose variable-length
    /// fields point into `payload` (see `RecoveryRecord`). The origin is looked up last, once
    /// the whole record parsed: `origins` then only ever saw records that recovery keeps.
    static func decodeRecord(type: UInt8, payload: UnsafeRawBufferPointer, location: RecordLocation,
                             origins: inout OriginTable) throws(Malformed) -> RecoveryRecord {
        do {
            var reader = ByteReader(payload)
            switch RecordFrame.RecordType(rawValue: type) {
            case .created:
                let prefix = try decodeCreatedPrefix(&reader)
                let state = try decodeLightState(&reader)
                let (origin, changed) = origins.origin(scheme: prefix.scheme, port: prefix.port, host: prefix.host)
                return RecoveryRecord(
                    kind: .created, id: prefix.id, location: location, createdAt: prefix.createdAt, priority: prefix.priority,
                    dependsOn: prefix.dependsOn, origin: origin, originChanged: changed, method: prefix.method,
                    target: prefix.target, idempotencyKey: prefix.idempotencyKey, fingerprint: prefix.fingerprint,
                    tag: prefix.tag, orderingKey: prefix.orderingKey, state: state)
            case .updated:
                let id = try reader.uuid()
                return RecoveryRecord(kind: .updated, id: id, location: location, state: try decodeLightState(&reader))
            case .deleted:
                return RecoveryRecord(kind: .deleted, id: try reader.uuid(), location: location)
            case .padding, nil:
                throw Malformed()
            }
        } catch {
            throw Malformed()
        }
    }

    /// Only the id of a record (compaction needs nothing else).
    static func decodeID(payload: UnsafeRawBufferPointer) throws(Malformed) -> UUID {
        var reader = ByteReader(payload)
        do { return try reader.uuid() } catch { throw Malformed() }
    }

    /// The fields of a `created` record before its state, as bytes in the payload.
    private struct CreatedPrefix {
        var id: UUID
        var createdAt: Int64
        var priority: OperationPriority
        var dependsOn: UUID?
        var scheme: Origin.Scheme
        var port: Int
        var host: UnsafeRawBufferPointer
        var method: UnsafeRawBufferPointer
        var target: UnsafeRawBufferPointer
        var idempotencyKey: UnsafeRawBufferPointer
        var fingerprint: UnsafeRawBufferPointer
        var tag: UnsafeRawBufferPointer?
        var orderingKey: UnsafeRawBufferPointer?
        var credentials: UnsafeRawBufferPointer?
    }

    private static func decodeCreatedPrefix(_ reader: inout ByteReader) throws -> CreatedPrefix {
        let id = try reader.uuid()
        let createdAt = try reader.i64()
        guard let priority = OperationPriority(rawValue: Int(try reader.u8())) else { throw Malformed() }
        let flags = try reader.u8()
        let dependsOn = flags & 2 != 0 ? try reader.uuid() : nil
        let scheme: Origin.Scheme = try reader.u8() == 1 ? .https : .http
        let port = Int(try reader.u16())
        let host = try reader.blobBytes()
        let method = try reader.blobBytes()
        let target = try reader.blobBytes()
        let idempotencyKey = try reader.blobBytes()
        let fingerprint = try reader.blobBytes()
        let tag = flags & 1 != 0 ? try reader.blobBytes() : nil
        let orderingKey = flags & 4 != 0 ? try reader.blobBytes() : nil
        let credentials = flags & 8 != 0 ? try reader.blobBytes() : nil
        // The body's length, in the layout so that a reader can size the body before reaching
        // it; no reader needs it yet.
        _ = try reader.u32()
        return CreatedPrefix(id: id, createdAt: createdAt, priority: priority, dependsOn: dependsOn, scheme: scheme,
                             port: port, host: host, method: method, target: target, idempotencyKey: idempotencyKey,
                             fingerprint: fingerprint, tag: tag, orderingKey: orderingKey, credentials: credentials)
    }

    private static func decodeLightState(_ reader: inout ByteReader) throws -> RecoveryRecord.LightState {
        guard let status = status(try reader.u8()) else { throw Malformed() }
        let flags = try reader.u8()
        var state = RecoveryRecord.LightState(status: status, retryCount: Int(try reader.i64()))
        if flags & 1 != 0 { state.lastAttemptAt = try reader.i64() }
        if flags & 2 != 0 { state.nextAttemptAt = try reader.i64() }
        if flags & 4 != 0 { state.lastError = try reader.blobBytes() }
        state.attempts = flags & 128 != 0
            ? Int(try reader.u32()) : impliedAttempts(state.status, retryCount: state.retryCount, attempted: state.lastAttemptAt != nil)
        // The heavy part is read later (or never, in recovery); remember what it holds.
        state.hasResponse = flags & 8 != 0
        state.hasConflict = flags & 16 != 0
        state.responseBodyOmitted = flags & 32 != 0
        state.conflictBodyOmitted = flags & 64 != 0
        return state
    }

    /// The attempts a state without the `attempts` field means (every state written before the
    /// field existed): each attempt was numbered `retryCount + 1`, so a pending operation had
    /// made `retryCount` of them, one in progress (or finished after an attempt) one more.
    private static func impliedAttempts(_ status: OperationStatus, retryCount: Int, attempted: Bool) -> Int {
        switch status {
        case .pending: retryCount
        case .inProgress: retryCount + 1
        case .completed, .failed, .conflict: retryCount + (attempted ? 1 : 0)
        }
    }

    private static func decodeHeavyState(_ reader: inout ByteReader, _ light: RecoveryRecord.LightState,
                                         into state: inout OperationState) throws {
        if light.hasResponse { state.response = try decodeResponse(&reader, bodyOmitted: light.responseBodyOmitted) }
        if light.hasConflict { state.conflict = try decodeResponse(&reader, bodyOmitted: light.conflictBodyOmitted) }
    }

    private static func decodeResponse(_ reader: inout ByteReader, bodyOmitted: Bool) throws -> StoredResponse {
        let status = Int(try reader.u16())
        let headers = try decodeHeaders(&reader)
        guard bodyOmitted else { return StoredResponse(status: status, headers: headers, body: try reader.blob()) }
        let size = try reader.i64()
        guard size >= 0 else { throw Malformed() }
        return StoredResponse(status: status, headers: headers, body: [], omittedBodySize: Int(size))
    }

    private static func decodeHeaders(_ reader: inout ByteReader) throws -> HTTPHeaders {
        let count = Int(try reader.u32())
        // Each field takes at least 8 bytes: a count beyond that is damage, not a reason to reserve.
        guard count <= reader.remaining / 8 else { throw Malformed() }
        // Measured first (lengths only), then copied into place in one pass.
        var measure = reader
        var byteCount = 0
        for _ in 0..<count {
            let nameLength = Int(try measure.u32())
            try measure.skip(nameLength)
            let valueLength = Int(try measure.u32())
            try measure.skip(valueLength)
            byteCount += nameLength + valueLength + 4
        }
        // Every length was checked against the record above, so these reads succeed; were one
        // to fail, the record is reported as damaged like any other that does not parse.
        let headers = HTTPHeaders(validatedCount: count, byteCount: byteCount) { builder in
            for _ in 0..<count {
                guard let name = try? reader.blobBytes(), let value = try? reader.blobBytes() else { return false }
                builder.add(name: name, value: value)
            }
            return true
        }
        guard let headers else { throw Malformed() }
        return headers
    }

    private static func statusCode(_ status: OperationStatus) -> UInt8 {
        switch status {
        case .pending: 0
        case .inProgress: 1
        case .completed: 2
        case .failed: 3
        case .conflict: 4
        }
    }

    private static func status(_ code: UInt8) -> OperationStatus? {
        switch code {
        case 0: .pending
        case 1: .inProgress
        case 2: .completed
        case 3: .failed
        case 4: .conflict
        default: nil
        }
    }
}

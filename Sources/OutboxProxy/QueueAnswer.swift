import Foundation
import OutboxHTTP
import OutboxModel
import OutboxQueue

/// A response the queue gives in the origin's place: the `202 Accepted` for a stored operation,
/// or a completed operation's kept response for a client repeating its key. Built from values
/// only; the exchange adds the `Connection` header (the `202` takes it as an argument) and
/// writes it.
struct QueueAnswer: Equatable {
    var head: HTTPResponseHead
    var body: [UInt8]

    /// Writes the `202 Accepted` for `info` into `out`, head and body in one piece: its id (also
    /// as `Outbox-Operation-Id` and in the `Location` below `locationBase`), its key under
    /// `idempotencyHeader`, `Connection: connection` when given, and a JSON body with id, status,
    /// key and `queuedAt` (left out when `withBody` is false, as a `HEAD` answer is; its length
    /// still framed). Returns the body's length.
    ///
    /// Every stored request is answered with one, so it is written from byte templates: the text
    /// is the one a head of `HTTPHeaders` and a `JSON` body render, without building either.
    static func writeAccepted(_ info: OperationSnapshot, locationBase: String, idempotencyHeader: String,
                              connection: String?, withBody: Bool, into out: inout [UInt8]) -> Int {
        let status = info.state.status.rawValue
        let bodyCount = AcceptedTemplate.fixedBodyBytes + status.utf8.count + JSON.quotedCount(info.idempotencyKey)
            + WallClock.iso8601ByteCount(millis: info.createdAt)
        // The id's text, made once for its three places.
        withUnsafeTemporaryAllocation(byteCount: UUIDText.textLength, alignment: 1) { id in
            UUIDText.write(info.id, into: id)
            out.append(contentsOf: AcceptedTemplate.statusAndLength)
            JSON.appendDigits(UInt(bodyCount), to: &out)
            out.append(contentsOf: AcceptedTemplate.location)
            HTTPSerializer.appendSanitized(locationBase, into: &out)
            out.append(contentsOf: id)
            out.append(contentsOf: AcceptedTemplate.operationID)
            out.append(contentsOf: id)
            out.append(contentsOf: AcceptedTemplate.crlf)
            HTTPSerializer.appendSanitized(idempotencyHeader, into: &out)
            out.append(contentsOf: AcceptedTemplate.colonSpace)
            HTTPSerializer.appendSanitized(info.idempotencyKey, into: &out)
            out.append(contentsOf: AcceptedTemplate.crlf)
            if let connection {
                out.append(contentsOf: AcceptedTemplate.connection)
                HTTPSerializer.appendSanitized(connection, into: &out)
                out.append(contentsOf: AcceptedTemplate.crlf)
            }
            out.append(contentsOf: AcceptedTemplate.crlf)
            guard withBody else { return }
            out.append(contentsOf: AcceptedTemplate.bodyID)
            out.append(contentsOf: id)
            out.append(contentsOf: AcceptedTemplate.bodyStatus)
            out.append(contentsOf: status.utf8)
            out.append(contentsOf: AcceptedTemplate.bodyKey)
            JSON.appendQuoted(info.idempotencyKey, to: &out)
            out.append(contentsOf: AcceptedTemplate.bodyQueuedAt)
            WallClock.appendISO8601(millis: info.createdAt, to: &out)
            out.append(contentsOf: AcceptedTemplate.bodyEnd)
        }
        return bodyCount
    }

    /// The kept response of the completed operation `id`, framed by its length (it was stored
    /// whole) and marked `Idempotent-Replayed: true`.
    static func replayed(_ stored: StoredResponse, operation id: UUID) -> QueueAnswer {
        var headers = stored.headers
        headers.removeAll("Content-Length")
        headers.removeAll("Transfer-Encoding")
        headers.add("Content-Length", String(stored.body.count))
        headers.add("Outbox-Operation-Id", UUIDText.lowercase(id))
        headers.add("Idempotent-Replayed", "true")
        return QueueAnswer(head: HTTPResponseHead(status: stored.status, headers: headers), body: stored.body)
    }
}

/// The constant pieces of the `202`, in the order they are written.
private enum AcceptedTemplate {
    static let statusAndLength = Array("HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: ".utf8)
    static let location = Array("\r\nLocation: ".utf8)
    static let operationID = Array("\r\nOutbox-Operation-Id: ".utf8)
    static let connection = Array("Connection: ".utf8)
    static let colonSpace = Array(": ".utf8)
    static let crlf = Array("\r\n".utf8)
    static let bodyID = Array(#"{"id":""#.utf8)
    static let bodyStatus = Array(#"","status":""#.utf8)
    static let bodyKey = Array(#"","idempotencyKey":"#.utf8)
    static let bodyQueuedAt = Array(#","queuedAt":""#.utf8)
    static let bodyEnd = Array("\"}\n".utf8)
    /// Body bytes besides the status, the quoted key and the time: the id and the field names.
    static let fixedBodyBytes = bodyID.count + UUIDText.textLength + bodyStatus.count + bodyKey.count
        + bodyQueuedAt.count + bodyEnd.count
}

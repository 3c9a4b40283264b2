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

    /// The parts of every `202` that come from the configuration, rendered once: the
    /// `Location` line up to the id (`locationBase`, relative or absolute) and the name of the
    /// idempotency header, each sanitised as a header line must be.
    struct AcceptedTemplate: Sendable {
        /// `\r\nLocation: <base>`: the id follows.
        let locationLine: [UInt8]
        /// `\r\n<idempotency header>: `: the key follows.
        let keyLine: [UInt8]

        init(locationBase: String, idempotencyHeader: String) {
            var location = Array("\r\nLocation: ".utf8)
            HTTPSerializer.appendSanitized(locationBase, into: &location)
            locationLine = location
            var key = Array("\r\n".utf8)
            HTTPSerializer.appendSanitized(idempotencyHeader, into: &key)
            key.append(contentsOf: ": ".utf8)
            keyLine = key
        }
    }

    /// Writes the `202 Accepted` for `info` into `out`, head and body in one piece: its id (also
    /// as `Outbox-Operation-Id` and in the `Location` below the template's base), its key under
    /// the template's header, `Connection: connection` when given, and a JSON body with id,
    /// status, key and `queuedAt` (left out when `withBody` is false, as a `HEAD` answer is; its
    /// length still framed). Returns the body's length.
    ///
    /// Every stored request is answered with one, so it is written from byte templates: the text
    /// is the one a head of `HTTPHeaders` and a `JSON` body render, without building either.
    static func writeAccepted(_ info: OperationSnapshot, template: AcceptedTemplate,
                              connection: String?, withBody: Bool, into out: inout [UInt8]) -> Int {
        let status = info.state.status.rawValue
        var key = info.idempotencyKey
        // Keys are almost always plain (a UUID Outbox made up, or a client's token): one look
        // at the bytes then spares the quoting, counting and sanitizing three more.
        let plainKey = key.withUTF8(JSON.isPlain)
        let bodyCount = Self.fixedBodyBytes + status.utf8.count
            + (plainKey ? key.utf8.count + 2 : JSON.quotedCount(key))
            + WallClock.iso8601ByteCount(millis: info.createdAt)
        // The id's text, made once for its three places.
        withUnsafeTemporaryAllocation(byteCount: UUIDText.textLength, alignment: 1) { id in
            UUIDText.write(info.id, into: id)
            out.append(literal: "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: ")
            JSON.appendDigits(UInt(bodyCount), to: &out)
            out.append(contentsOf: template.locationLine)
            out.append(contentsOf: id)
            out.append(literal: "\r\nOutbox-Operation-Id: ")
            out.append(contentsOf: id)
            out.append(contentsOf: template.keyLine)
            if plainKey {
                key.withUTF8 { out.append(contentsOf: $0) }
            } else {
                HTTPSerializer.appendSanitized(key, into: &out)
            }
            out.append(literal: "\r\n")
            if let connection {
                out.append(literal: "Connection: ")
                HTTPSerializer.appendSanitized(connection, into: &out)
                out.append(literal: "\r\n")
            }
            out.append(literal: "\r\n")
            guard withBody else { return }
            out.append(literal: #"{"id":""#)
            out.append(contentsOf: id)
            out.append(literal: #"","status":""#)
            out.append(contentsOf: status.utf8)
            out.append(literal: #"","idempotencyKey":"#)
            if plainKey {
                out.append(literal: "\"")
                key.withUTF8 { out.append(contentsOf: $0) }
                out.append(literal: "\"")
            } else {
                JSON.appendQuoted(key, to: &out)
            }
            out.append(literal: #","queuedAt":""#)
            WallClock.appendISO8601(millis: info.createdAt, to: &out)
            out.append(literal: "\"}\n")
        }
        return bodyCount
    }

    /// The `202` body's bytes besides the status, the quoted key and the time: the id's text and
    /// the literals around the fields, as `writeAccepted` writes them.
    private static let fixedBodyBytes = #"{"id":""#.utf8.count + UUIDText.textLength + #"","status":""#.utf8.count
        + #"","idempotencyKey":"#.utf8.count + #","queuedAt":""#.utf8.count + "\"}\n".utf8.count

    /// The kept response of the completed operation `id`, framed by its length (it was stored
    /// whole) and marked `Idempotent-Replayed: true`. A body that was too large to keep is
    /// answered empty (`Content-Length: 0`) and marked `Outbox-Response-Body-Omitted: true`:
    /// the client learns the outcome without taking a part for the whole.
    static func replayed(_ stored: StoredResponse, operation id: UUID) -> QueueAnswer {
        var headers = stored.headers
        headers.removeAll("Content-Length")
        headers.removeAll("Transfer-Encoding")
        headers.add("Content-Length", String(stored.body.count))
        headers.add("Outbox-Operation-Id", UUIDText.lowercase(id))
        headers.add("Idempotent-Replayed", "true")
        if stored.omittedBodySize != nil { headers.add("Outbox-Response-Body-Omitted", "true") }
        return QueueAnswer(head: HTTPResponseHead(status: stored.status, headers: headers), body: stored.body)
    }
}

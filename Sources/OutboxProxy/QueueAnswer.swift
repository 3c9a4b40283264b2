import Foundation
import OutboxHTTP
import OutboxModel
import OutboxQueue

/// A response the queue gives in the origin's place: the `202 Accepted` for a stored operation,
/// or a completed operation's kept response for a client repeating its key. Built from values
/// only; the exchange adds the `Connection` header and writes it.
struct QueueAnswer: Equatable {
    var head: HTTPResponseHead
    var body: [UInt8]

    /// `202 Accepted` for `info`: its id (also as `Outbox-Operation-Id` and in the `Location`
    /// below `locationBase`), its key under `idempotencyHeader`, and a JSON body with id,
    /// status, key and `queuedAt`.
    static func accepted(_ info: OperationSnapshot, locationBase: String, idempotencyHeader: String) -> QueueAnswer {
        let id = UUIDText.lowercase(info.id)
        let text = JSON.object([
            ("id", .string(id)), ("status", .string(info.state.status.rawValue)),
            ("idempotencyKey", .string(info.idempotencyKey)), ("queuedAt", .string(WallClock.iso8601(millis: info.createdAt))),
        ]).rendered() + "\n"
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        headers.add("Content-Length", String(text.utf8.count))
        headers.add("Location", locationBase + id)
        headers.add("Outbox-Operation-Id", id)
        headers.add(idempotencyHeader, info.idempotencyKey)
        return QueueAnswer(head: HTTPResponseHead(status: 202, headers: headers), body: Array(text.utf8))
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

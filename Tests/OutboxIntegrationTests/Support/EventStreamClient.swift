import Foundation

/// A listener on `GET /admin/events`: reads the server-sent events one at a time, each with a
/// deadline, as a browser's EventSource would (comment lines skipped).
final class EventStreamClient {
    struct Event: CustomStringConvertible {
        var id: String?
        var type: String
        var data: String

        /// `data` as a JSON object.
        func json() throws -> JSONObject { try JSONObject(parsing: Array(data.utf8)) }

        var description: String { "#\(id ?? "-") \(type) \(data)" }
    }

    let client: RawClient
    /// The response head's status.
    let status: Int
    let head: String

    /// Connects to `outbox` and asks for the stream; `headers` are added as given.
    /// `receiveBuffer` pins the socket's receive buffer (a listener meant to fall behind).
    init(_ outbox: OutboxProcess, headers: [HeaderField] = [], path: String = "/admin/events",
         receiveBuffer: Int32? = nil) throws {
        client = try RawClient(port: outbox.port, receiveBuffer: receiveBuffer)
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(outbox.port)\r\nAccept: text/event-stream\r\n"
        for field in headers { request += "\(field.name): \(field.value)\r\n" }
        try client.send(request + "\r\n")
        guard let bytes = try client.readHeadOnly() else { throw HarnessError("the events request got no answer") }
        head = String(decoding: bytes, as: UTF8.self)
        let statusLine = head.split(separator: "\r\n").first ?? ""
        status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// The next event; throws when none arrives within `timeout`.
    func next(timeout: Duration = .seconds(15)) throws -> Event {
        let deadline = ContinuousClock.now + timeout
        var event = Event(id: nil, type: "message", data: "")
        var seenField = false
        while true {
            let remaining = max(.milliseconds(1), deadline - ContinuousClock.now)
            let line = try client.readLine(timeout: remaining)
            if line.isEmpty {
                if seenField { return event }
                continue
            }
            if line.hasPrefix(":") { continue }
            seenField = true
            let (name, value) = line.firstIndex(of: ":").map {
                (String(line[..<$0]), String(line[line.index(after: $0)...].drop { $0 == " " }))
            } ?? (line, "")
            switch name {
            case "id": event.id = value
            case "event": event.type = value
            case "data": event.data += event.data.isEmpty ? value : "\n" + value
            default: break
            }
        }
    }

    /// Reads events until one satisfies `predicate` and returns it; the others are returned in
    /// `skipped` order by `collect`.
    func next(timeout: Duration = .seconds(15), where predicate: (Event) throws -> Bool) throws -> Event {
        let deadline = ContinuousClock.now + timeout
        while true {
            let event = try next(timeout: max(.milliseconds(1), deadline - ContinuousClock.now))
            if try predicate(event) { return event }
        }
    }
}

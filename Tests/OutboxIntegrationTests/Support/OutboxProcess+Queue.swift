import Foundation

/// Requests the queue tests make again and again: a write with a body, the admin API's
/// operation and drain endpoints, and bounded polling of one operation's status.
extension OutboxProcess {
    /// The config most queue tests share: probes every 0.1 s and fast retries without jitter,
    /// so an outage ends and a retry happens within a fraction of a second. `retry`, `queue`
    /// and `replay` are the members of those objects, as JSON text.
    static func fastQueueConfig(retry: String = #""preset": "immediate""#, queue: String = "",
                                replay: String = "") -> String {
        """
        {"reachability": {"probeIntervalSeconds": 0.1, "connectTimeoutSeconds": 1},
         "retry": {\(retry)},
         "queue": {\(queue)},
         "replay": {\(replay)}}
        """
    }

    /// Sends `method target` with `body` (always a `Content-Length`, even 0) and extra header
    /// fields on a fresh connection, and reads the response.
    func send(_ method: String, _ target: String, body: String = "", headers: [HeaderField] = [],
              timeout: Duration = .seconds(10)) throws -> HTTPResponse {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
        for field in headers { head += "\(field.name): \(field.value)\r\n" }
        head += "Content-Length: \(body.utf8.count)\r\n\r\n"
        return try exchange(head + body, method: method, timeout: timeout)
    }

    /// POSTs `body` to `target` and requires a `202`: the request was stored.
    func enqueue(_ target: String = "/items", body: String, headers: [HeaderField] = []) throws -> QueuedOperation {
        try QueuedOperation(send("POST", target, body: body, headers: headers))
    }

    /// `GET /admin/<path>` (path without the prefix, query included).
    func admin(_ path: String, timeout: Duration = .seconds(10)) throws -> HTTPResponse {
        try send("GET", "/admin/" + path, timeout: timeout)
    }

    /// `GET /admin/operations/{id}`, required to be `200` with a JSON object.
    func operation(_ id: String) throws -> JSONObject {
        let response = try admin("operations/\(id)")
        guard response.status == 200 else {
            throw HarnessError("GET /admin/operations/\(id) answered:\n\(response)\n\(self)")
        }
        return try JSONObject(response)
    }

    /// Polls the operation until its `status` is one of `statuses`; throws with the last
    /// document seen when `timeout` passes.
    func waitForOperation(_ id: String, toBe statuses: Set<String>,
                          timeout: Duration = .seconds(15)) async throws -> JSONObject {
        try await waitForOperation(id, describedAs: "\(statuses.sorted())", timeout: timeout) { document in
            document.string("status").map { statuses.contains($0) } ?? false
        }
    }

    /// Looks at `GET /admin/operations/{id}` until `predicate` holds; throws with the last
    /// document seen when `timeout` passes. Between looks it waits for the operation's next
    /// event on `/admin/events`, subscribed before the first look so that no change falls in
    /// between (or, where the stream is not available, for the proxy to log what it did). Each
    /// wait is bounded, and it looks once more after the deadline: a test thread that was
    /// descheduled past it must not fail on a stale answer.
    func waitForOperation(_ id: String, describedAs condition: String, timeout: Duration = .seconds(15),
                          until predicate: (JSONObject) -> Bool) async throws -> JSONObject {
        let deadline = Deadline(after: timeout)
        let events = (try? EventStreamClient(self)).flatMap { $0.status == 200 ? $0 : nil }
        defer { events?.client.close() }
        while true {
            let expired = deadline.hasPassed
            let logged = child.observed.value.stderr.count
            let document = try operation(id)
            if predicate(document) { return document }
            if expired {
                throw HarnessError("operation \(id) not \(condition) within \(timeout); last seen: \(document.text)\n\(self)")
            }
            if let events {
                // A timeout only means "look again"; so does any other operation's event.
                _ = try? events.next(timeout: .milliseconds(500)) { $0.type == "operation" && $0.data.contains(id) }
            } else {
                await waitForActivity(after: logged)
            }
        }
    }

    /// Looks at `GET /admin/status` until the entry of `origin` in `origins` satisfies
    /// `predicate` (bounded, one last look after the deadline) and returns that entry.
    func waitForOriginStatus(_ origin: String, timeout: Duration = .seconds(15),
                             until predicate: (JSONObject) -> Bool) async throws -> JSONObject {
        let deadline = Deadline(after: timeout)
        while true {
            let expired = deadline.hasPassed
            let logged = child.observed.value.stderr.count
            let status = try JSONObject(admin("status"))
            if let entry = status.objects("origins")?.first(where: { $0.string("origin") == origin }), predicate(entry) {
                return entry
            }
            if expired { throw HarnessError("origin \(origin) not as expected within \(timeout); status: \(status)\n\(self)") }
            await waitForActivity(after: logged)
        }
    }

    /// Returns once the proxy has logged a line after the first `offset` bytes of its stderr
    /// that is not the access line of an admin request (those are the test's own looks): a
    /// replay, an origin going off- or online, a probe. Every state change the queue tests
    /// wait for is logged; `atMost` bounds the wait for the few that are not (and for a
    /// proxy started with a quieter log level), so the caller then simply looks again.
    func waitForActivity(after offset: Int, atMost: Duration = .milliseconds(250)) async {
        _ = try? await child.observed.wait(timeout: atMost, describeTimeout: { _ in "no activity" }) { observed in
            Self.loggedActivity(in: observed.stderr, after: offset) ? true : nil
        }
    }

    private static func loggedActivity(in stderr: [UInt8], after offset: Int) -> Bool {
        guard stderr.count > offset else { return false }
        let text = String(decoding: stderr[offset...], as: UTF8.self)
        // Complete lines only: the last piece may still be growing.
        return text.split(separator: "\n", omittingEmptySubsequences: true).dropLast(text.hasSuffix("\n") ? 0 : 1)
            .contains { !$0.contains("target=/admin/") }
    }

    /// `GET /admin/drain?timeoutSeconds=N`, required to be `200 {"drained":true}`: every
    /// operation has reached completed, failed or conflict.
    @discardableResult
    func drain(timeoutSeconds: Int = 20) throws -> JSONObject {
        let response = try admin("drain?timeoutSeconds=\(timeoutSeconds)",
                                 timeout: .seconds(Int64(timeoutSeconds) + 10))
        guard response.status == 200 else {
            throw HarnessError("drain did not finish within \(timeoutSeconds) s:\n\(response)\n\(self)")
        }
        let document = try JSONObject(response)
        guard document.bool("drained") == true else {
            throw HarnessError("drain answered 200 without \"drained\":true: \(document)")
        }
        return document
    }
}

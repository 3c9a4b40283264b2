import Foundation
import OutboxModel
import Testing

/// Admin answers bounded in memory (SPEC §6) and stored responses over 1 MiB omitted, never cut
/// (SPEC §4), against the real binary: many concurrent views of one large operation each get
/// the whole body while the proxy keeps forwarding; bulk deletes and prunes remove what they
/// report; a replayed response over 1 MiB comes back to a repeated key as status and headers
/// with an empty body, marked, and its view says how long the body was. Memory itself is
/// measured by `Benchmarks/admin-memory.sh`, not asserted here.
@Suite("Admin API: bounded answers", .harnessThreads)
struct AdminBoundedAnswerTests {
    /// Sends `POST target` with `body` (bytes) and `headers` on a fresh connection.
    private static func post(_ outbox: OutboxProcess, _ target: String, body: [UInt8], headers: [HeaderField] = [],
                             timeout: Duration = .seconds(30)) throws -> HTTPResponse {
        let client = try outbox.connect()
        var head = "POST \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(outbox.port)\r\n"
        for field in headers { head += "\(field.name): \(field.value)\r\n" }
        head += "Content-Length: \(body.count)\r\n\r\n"
        try client.send(Array(head.utf8) + body, timeout: timeout)
        return try client.readResponse(to: "POST", timeout: timeout)
    }

    @Test func thirtyConcurrentViewsOfATenMebibyteOperationEachGetTheWholeBodyWhileTheProxyForwards() async throws {
        let upstream = try TestUpstream { request in
            .respond(.text(request.method == "GET" ? "small" : "stored", status: request.method == "GET" ? 200 : 201))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        // Binary, so the view carries it as base64: 10 MiB, the largest body the queue takes.
        let generated = GeneratedBody(count: 10 * 1024 * 1024, seed: 27)
        var bytes = [UInt8](repeating: 0, count: generated.count)
        var stream = generated.makeStream()
        _ = stream.read(into: &bytes)
        let stored = try QueuedOperation(Self.post(outbox, "/big", body: bytes, headers: [HeaderField("Outbox-Mode", "queue")]))
        bytes = []
        try outbox.drain()
        let expected = generated.sha256Hex()
        let id = stored.id

        let viewers = 30
        let digests = WaitableState<[String]>([])
        let port = outbox.port
        let views = TestThreads(viewers) { _ in
            let client = try RawClient(port: port)
            try client.send("GET /admin/operations/\(id) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
            var body = Base64MemberDigest(member: "bodyBase64")
            let response = try client.readResponse(timeout: .seconds(120), body: .inspect { body.add($0) })
            guard response.status == 200, response.headers["Content-Type"] == "application/json" else {
                throw HarnessError("\(response)")
            }
            let digest = try body.finish()
            digests.update { $0.append(digest) }
        }
        // Forwarding goes on meanwhile: a small request is answered by the origin.
        let small = try outbox.send("GET", "/small", timeout: .seconds(60))
        #expect(small.status == 200 && small.bodyText == "small", "\(small)\n\(outbox)")
        let problems = try await views.finished(within: .seconds(240))
        #expect(problems.isEmpty, "\(problems.prefix(3))\n\(outbox)")
        let seen = digests.value
        #expect(seen.count == viewers)
        #expect(seen.allSatisfy { $0 == expected }, "digests \(Set(seen)) vs the stored body's \(expected)")
    }

    @Test func viewOfATextBodyShowsItAsTextAndHeadIsFramedTheSame() async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        // Valid UTF-8 with characters JSON escapes, longer than one piece of the stream.
        let text = String(repeating: "é\"\\\n\t\u{1}ü€😀 plain text ", count: 4000)
        let stored = try QueuedOperation(Self.post(outbox, "/text", body: Array(text.utf8)))
        let document = try outbox.operation(stored.id)
        #expect(document.string("body") == text)
        #expect(!document.has("bodyBase64"))
        let view = try outbox.admin("operations/\(stored.id)")
        let head = try outbox.send("HEAD", "/admin/operations/\(stored.id)")
        #expect(head.status == 200 && head.body.isEmpty, "\(head)")
        #expect(head.headers["Content-Length"] == String(view.body.count), "\(head.headers) vs \(view.body.count) bytes")
    }

    /// Two bulk deletes at once: every operation is removed once and counted once, and none is
    /// left. (Main counted an operation in each delete that wrote a record for it.)
    @Test func concurrentBulkDeletesOfManyOperationsCountEachRemovalOnce() async throws {
        let count = 20_000
        let (upstream, outbox) = try await Self.holding(count)
        defer { withExtendedLifetime(upstream) {} }

        let answers = WaitableState<[Int]>([])
        let port = outbox.port
        let deletes = TestThreads(2) { _ in
            let client = try RawClient(port: port)
            try client.send("DELETE /admin/operations?status=pending HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
            let response = try client.readResponse(to: "DELETE", timeout: .seconds(120))
            guard response.status == 200, let removed = try JSONObject(response).int("removed") else {
                throw HarnessError("\(response)")
            }
            answers.update { $0.append(removed) }
        }
        let failures = try await deletes.finished(within: .seconds(150))
        #expect(failures.isEmpty, "a delete failed: \(failures)\n\(outbox)")
        let removed = answers.value
        #expect(removed.reduce(0, +) == count, "removed \(removed) of \(count)")
        let status = try JSONObject(outbox.admin("status"))
        #expect(status.object("counts")?.int("pending") == 0, "\(status)")
        let listed = try JSONObject(outbox.admin("operations?limit=10"))
        #expect(listed.objects("operations")?.isEmpty == true, "\(listed)")
    }

    @Test func pruneRemovesOnlyOperationsCreatedBeforeTheCutoffAndCountsThem() async throws {
        let count = 10_000
        let (upstream, outbox) = try await Self.holding(count)
        defer { withExtendedLifetime(upstream) {} }

        let none = try JSONObject(outbox.send("POST", "/admin/prune?olderThanSeconds=3600", timeout: .seconds(60)))
        #expect(none.int("removed") == 0, "\(none)")
        let all = try JSONObject(outbox.send("POST", "/admin/prune?olderThanSeconds=0", timeout: .seconds(120)))
        #expect(all.int("removed") == count, "\(all)\n\(outbox)")
        let status = try JSONObject(outbox.admin("status"))
        #expect(status.object("counts")?.int("pending") == 0, "\(status)")
    }

    /// An outbox holding `count` pending operations, its upstream down; stored from 64
    /// connections at once, so that group commit takes many per sync.
    private static func holding(_ count: Int) async throws -> (TestUpstream, OutboxProcess) {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let writers = 64
        let port = outbox.port
        let filling = TestThreads(writers) { writer in
            let client = try RawClient(port: port)
            for n in stride(from: writer, to: count, by: writers) {
                try client.send("POST /items HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Length: \(String(n).utf8.count)\r\n\r\n\(n)")
                let response = try client.readResponse(to: "POST", timeout: .seconds(30), body: .digestOnly)
                guard response.status == 202 else { throw HarnessError("\(response)") }
            }
        }
        let failures = try await filling.finished(within: .seconds(240))
        try #require(failures.isEmpty, "not all \(count) stored: \(failures.prefix(3))\n\(outbox)")
        return (upstream, outbox)
    }

    @Test func replayedResponseOverOneMebibyteIsOmittedNotCutAndSmallerOnesAreKeptWhole() async throws {
        let sizes = ["/over": 2 * 1024 * 1024, "/exact": 1024 * 1024, "/under": 1024 * 1024 - 1, "/conflict": 2 * 1024 * 1024]
        let bodies = sizes.mapValues(Self.responseBody(size:))
        let upstream = try TestUpstream { request in
            let path = String(request.target.prefix { $0 != "?" })
            return .respond(UpstreamResponse(status: path == "/conflict" ? 409 : 201, headers: [HeaderField("X-Upstream", "yes")],
                                             body: .bytes(bodies[path] ?? [])))
        }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        var stored: [String: QueuedOperation] = [:]
        for path in ["/over", "/exact", "/under", "/conflict"] {
            stored[path] = try outbox.enqueue(path, body: "write \(path)", headers: [HeaderField("Idempotency-Key", "key\(path)")])
        }
        try upstream.restart()
        try outbox.drain(timeoutSeconds: 60)

        // Over 1 MiB: status and headers, an empty body, marked; the view says how long it was.
        let over = try outbox.send("POST", "/over", body: "write /over", headers: [HeaderField("Idempotency-Key", "key/over")])
        #expect(over.status == 201, "\(over)")
        #expect(over.body.isEmpty && over.headers["Content-Length"] == "0", "\(over.headers)")
        #expect(over.headers["Outbox-Response-Body-Omitted"] == "true", "\(over.headers)")
        #expect(over.headers["Idempotent-Replayed"] == "true", "\(over.headers)")
        #expect(over.headers["Outbox-Operation-Id"] == stored["/over"]?.id, "\(over.headers)")
        #expect(over.headers["X-Upstream"] == "yes", "\(over.headers)")
        let overView = try outbox.operation(try #require(stored["/over"]).id)
        let response = try #require(overView.object("response"), "\(overView.text.prefix(2000))")
        #expect(response.int("status") == 201)
        #expect(response.bool("bodyOmitted") == true && response.int("bodySize") == 2 * 1024 * 1024, "\(response.text.prefix(500))")
        #expect(!response.has("body") && !response.has("bodyBase64"), "\(response.text.prefix(500))")

        // The same for conflict data over 1 MiB.
        let conflictView = try outbox.operation(try #require(stored["/conflict"]).id)
        #expect(conflictView.string("status") == "conflict", "\(conflictView.text.prefix(500))")
        let conflict = try #require(conflictView.object("conflict"), "\(conflictView.text.prefix(2000))")
        #expect(conflict.int("status") == 409)
        #expect(conflict.bool("bodyOmitted") == true && conflict.int("bodySize") == 2 * 1024 * 1024, "\(conflict.text.prefix(500))")

        // 1 MiB and less: kept whole, answered whole, not marked.
        for path in ["/exact", "/under"] {
            let body = try #require(bodies[path])
            let again = try outbox.send("POST", path, body: "write \(path)", headers: [HeaderField("Idempotency-Key", "key\(path)")])
            #expect(again.status == 201 && again.body == body, "\(path): \(again.headers)")
            #expect(again.headers["Content-Length"] == String(body.count), "\(path): \(again.headers)")
            #expect(again.headers["Outbox-Response-Body-Omitted"] == nil, "\(path): \(again.headers)")
            let view = try outbox.operation(try #require(stored[path]).id)
            let kept = try #require(view.object("response"))
            #expect(kept.string("body") == String(decoding: body, as: UTF8.self), "\(path)")
            #expect(!kept.has("bodyOmitted") && !kept.has("bodySize"), "\(path): \(kept.text.prefix(300))")
        }
        #expect(upstream.requests.count == 4, "a repeat reached the upstream: \(upstream.requests.map(\.target))")
    }

    /// `size` bytes of text: lines of digits and letters, so a cut would show.
    private static func responseBody(size: Int) -> [UInt8] {
        let line = Array("0123456789abcdefghijklmnopqrstuvwxyz\n".utf8)
        var body = [UInt8]()
        body.reserveCapacity(size + line.count)
        while body.count < size { body += line }
        return Array(body[..<size])
    }
}

/// Threads of a test's own, since each blocks in its sockets: `work(i)` for every `i` below
/// `count`, started at once; `finished(within:)` waits until all have ended.
struct TestThreads {
    private let state = WaitableState((finished: 0, failures: [String]()))
    private let count: Int

    init(_ count: Int, _ work: @escaping @Sendable (Int) throws -> Void) {
        self.count = count
        for index in 0..<count {
            Thread { [state] in
                do {
                    try work(index)
                } catch {
                    state.update { $0.failures.append("\(error)") }
                }
                state.update { $0.finished += 1 }
            }.start()
        }
    }

    /// What the threads threw, once every one has ended.
    func finished(within timeout: Duration) async throws -> [String] {
        let count = self.count
        return try await state.wait(timeout: timeout, describeTimeout: { "\($0.finished) of \(count) threads ended" },
                                    until: { $0.finished == count ? $0.failures : nil })
    }
}

/// The SHA-256 of the bytes whose base64 text is the first string member named `member` of a
/// JSON text that arrives in pieces: the view of a 10 MiB body is decoded as it is read, so 30
/// viewers do not hold 400 MB of text in the test process.
struct Base64MemberDigest {
    private let marker: [UInt8]
    /// Bytes of `marker` matched so far, until it is found.
    private var matched = 0
    private var found = false
    private var ended = false
    /// Base64 text not decoded yet (less than a decodable block).
    private var pending: [UInt8] = []
    private var hasher = SHA256()

    init(member: String) {
        marker = Array("\"\(member)\":\"".utf8)
    }

    mutating func add(_ piece: UnsafeRawBufferPointer) {
        var index = 0
        while index < piece.count, !ended {
            if !found {
                matched = piece[index] == marker[matched] ? matched + 1 : (piece[index] == marker[0] ? 1 : 0)
                index += 1
                if matched == marker.count { found = true }
                continue
            }
            let rest = UnsafeRawBufferPointer(rebasing: piece[index...])
            let end = rest.firstIndex(of: UInt8(ascii: "\"")) ?? rest.count
            pending.append(contentsOf: rest[..<end])
            index += end
            if end < rest.count { ended = true }
            decode(all: ended)
        }
    }

    private mutating func decode(all: Bool) {
        let usable = all ? pending.count : pending.count / 4 * 4
        guard usable > 0 else { return }
        if let bytes = Data(base64Encoded: Data(pending[..<usable])) {
            bytes.withUnsafeBytes { hasher.update($0) }
        } else {
            ended = true
            found = false
        }
        pending.removeFirst(usable)
    }

    /// The digest, or an error when the member was not there or not base64.
    mutating func finish() throws -> String {
        guard found, ended else { throw HarnessError("no complete base64 member \(String(decoding: marker, as: UTF8.self))") }
        return hasher.finalizeHex()
    }
}

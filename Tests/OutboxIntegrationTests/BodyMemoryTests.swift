import Foundation
import Glibc
import OutboxModel
import Testing

/// `limits.bodyMemoryBytes`: request bodies that must be kept until the upstream answers are
/// held in memory up to the budget, across all exchanges, and beyond it in spill files in
/// `dataDirectory` (mode 0600, unlinked at once, gone when the exchange ends). Forwarded and
/// stored bodies stay byte for byte what the client sent.
@Suite("Request bodies beyond the memory budget", .harnessThreads)
struct BodyMemoryTests {
    /// Six bodies of 4 MiB against a 1 MiB budget: every one of them outgrows it.
    static let bodyCount = 6
    static let bodySize = 4 << 20
    static let budget = 1 << 20

    /// Body `index`: distinct bytes for every upload.
    static func body(_ index: Int) -> [UInt8] {
        var stream = GeneratedBody(count: bodySize, seed: 27_000 + UInt64(index)).makeStream()
        var bytes = [UInt8](repeating: 0, count: bodySize)
        _ = stream.read(into: &bytes)
        return bytes
    }

    /// Sends upload `index` as `POST target` with its idempotency key: bodies with an odd index
    /// go chunked (no length announced, so they outgrow the budget part-way), the others with a
    /// `Content-Length` (larger than the budget from their first byte).
    static func sendUpload(_ index: Int, _ body: [UInt8], target: String, on client: RawClient) throws {
        var head = "POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: upload-\(index)\r\n"
        guard index % 2 == 1 else {
            try client.send(head + "Content-Length: \(body.count)\r\n\r\n")
            try client.send(body, timeout: .seconds(30))
            return
        }
        head += "Transfer-Encoding: chunked\r\n\r\n"
        try client.send(head)
        let piece = 256 * 1024
        for start in stride(from: 0, to: body.count, by: piece) {
            let end = min(body.count, start + piece)
            try client.send(Array((String(end - start, radix: 16) + "\r\n").utf8) + body[start..<end] + [13, 10],
                            timeout: .seconds(30))
        }
        try client.send("0\r\n\r\n")
    }

    /// The proxy's open descriptors on spill files: links under /proc/PID/fd into the data
    /// directory, named like one, already unlinked; with each one's permission bits.
    static func openSpillFiles(of outbox: OutboxProcess, dataDirectory: String) -> [(link: String, mode: mode_t)] {
        let fdDirectory = "/proc/\(outbox.pid)/fd"
        let resolved = URL(fileURLWithPath: dataDirectory).resolvingSymlinksInPath().path
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: fdDirectory)) ?? []
        return entries.compactMap { entry in
            guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: fdDirectory + "/" + entry),
                  link.hasPrefix(resolved + "/" + SpillFile.namePrefix) else { return nil }
            var info = stat()
            guard stat(fdDirectory + "/" + entry, &info) == 0 else { return nil }
            return (link, info.st_mode & 0o777)
        }
    }

    /// Names in the data directory that look like spill files (there should never be one).
    static func spillNames(in dataDirectory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dataDirectory)) ?? []).filter { $0.hasPrefix(SpillFile.namePrefix) }
    }

    /// Waits (bounded, one look after the deadline) until the proxy has no spill file open.
    static func waitForNoSpillFiles(of outbox: OutboxProcess, dataDirectory: String) async -> [(link: String, mode: mode_t)] {
        let deadline = Deadline(after: .seconds(10))
        while true {
            let expired = deadline.hasPassed
            let open = openSpillFiles(of: outbox, dataDirectory: dataDirectory)
            if open.isEmpty || expired { return open }
            await outbox.waitForActivity(after: outbox.child.observed.value.stderr.count, atMost: .milliseconds(50))
        }
    }

    static func config(_ extra: String = "") -> String {
        """
        {"limits": {"bodyMemoryBytes": \(budget)}, "queue": {"maxBodyBytes": \(bodySize * 2)}\(extra)}
        """
    }

    @Test func forwardedBodiesBeyondTheBudget_AreSpilledToUnlinkedPrivateFiles_AndArriveIntact() async throws {
        let gate = Gate()
        // Reads each whole body, then holds its answer: Outbox must keep every body meanwhile.
        let upstream = try TestUpstream { request in
            .hold(until: gate, then: .respond(.text(SHA256.hex(of: request.body))))
        }
        // The answers are held as long as the test takes to look: no response timeout meanwhile.
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL,
                                                   config: Self.config(#", "reachability": {"responseTimeoutSeconds": 300}"#))
        let dataDirectory = outbox.directory.file("data")
        let bodies = (0..<Self.bodyCount).map(Self.body)
        var clients: [RawClient] = []
        for (index, body) in bodies.enumerated() {
            let client = try outbox.connect()
            try Self.sendUpload(index, body, target: "/upload/\(index)", on: client)
            clients.append(client)
        }
        let received = try await upstream.waitForRequests(Self.bodyCount, timeout: .seconds(60))
        for request in received {
            let index = try #require(Int(request.target.split(separator: "/").last ?? ""), "\(request)")
            #expect(SHA256.hex(of: request.body) == SHA256.hex(of: bodies[index]),
                    "upload \(index): \(request.body.count) bytes reached the upstream, changed")
        }

        // Every held exchange keeps its body in a file of its own, private and already nameless.
        let open = Self.openSpillFiles(of: outbox, dataDirectory: dataDirectory)
        #expect(open.count == Self.bodyCount, "spill files open while the answers are held: \(open.map { $0.link })\n\(outbox)")
        for file in open {
            #expect(file.mode == 0o600, "\(file.link) has mode \(String(file.mode, radix: 8))")
            #expect(file.link.hasSuffix(" (deleted)"), "\(file.link) still has a name")
        }
        #expect(Self.spillNames(in: dataDirectory).isEmpty)

        gate.open()
        for (index, client) in clients.enumerated() {
            let response = try client.readResponse(timeout: .seconds(30))
            #expect(response.status == 200, "upload \(index): \(response)\n\(outbox)")
            #expect(response.bodyText == SHA256.hex(of: bodies[index]), "upload \(index) arrived changed")
        }
        let left = await Self.waitForNoSpillFiles(of: outbox, dataDirectory: dataDirectory)
        #expect(left.isEmpty, "spill files still open after every exchange ended: \(left.map { $0.link })")
        #expect(Self.spillNames(in: dataDirectory).isEmpty)
    }

    @Test func storedBodiesBeyondTheBudget_AreReplayedByteForByte_AndLeaveNoSpillFile() async throws {
        let upstream = try TestUpstream { request in .respond(.text(SHA256.hex(of: request.body))) }
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: Self.config("""
            , "reachability": {"probeIntervalSeconds": 0.1, "connectTimeoutSeconds": 1}, "retry": {"preset": "immediate"}
            """))
        let dataDirectory = outbox.directory.file("data")
        let bodies = (0..<Self.bodyCount).map(Self.body)
        for (index, body) in bodies.enumerated() {
            let client = try outbox.connect()
            try Self.sendUpload(index, body, target: "/stored/\(index)", on: client)
            let response = try client.readResponse(timeout: .seconds(30))
            #expect(response.status == 202, "upload \(index): \(response)\n\(outbox)")
        }
        let left = await Self.waitForNoSpillFiles(of: outbox, dataDirectory: dataDirectory)
        #expect(left.isEmpty, "spill files still open after the 202s: \(left.map { $0.link })")
        #expect(Self.spillNames(in: dataDirectory).isEmpty)

        // What the log holds is what was sent: the replay delivers it.
        try upstream.restart()
        let replayed = try await upstream.waitForRequests(Self.bodyCount, timeout: .seconds(60))
        for request in replayed {
            let key = try #require(request.headers["Idempotency-Key"], "\(request)")
            let index = try #require(Int(key.dropFirst("upload-".count)), "\(key)")
            #expect(request.target == "/stored/\(index)")
            #expect(request.body.count == Self.bodySize, "\(key): \(request.body.count) bytes replayed")
            #expect(SHA256.hex(of: request.body) == SHA256.hex(of: bodies[index]), "\(key) was replayed changed")
        }
    }

    /// Waits (bounded, one look after the deadline) until the proxy has `count` spill files open.
    static func waitForSpillFiles(_ count: Int, of outbox: OutboxProcess, dataDirectory: String) async -> Int {
        let deadline = Deadline(after: .seconds(20))
        while true {
            let expired = deadline.hasPassed
            let open = openSpillFiles(of: outbox, dataDirectory: dataDirectory).count
            if open == count || expired { return open }
            await outbox.waitForActivity(after: outbox.child.observed.value.stderr.count, atMost: .milliseconds(50))
        }
    }

    /// Sends `body` chunked as `POST target`, without waiting for an answer.
    static func sendChunked(_ body: [UInt8], target: String, on client: RawClient) throws {
        try client.send("POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        try client.send(Array((String(body.count, radix: 16) + "\r\n").utf8) + body + Array("\r\n0\r\n\r\n".utf8))
    }

    @Test func theBudgetComesBackWhenExchangesEnd_AnsweredOrAbortedByTheClient() async throws {
        let first = Gate()
        let third = Gate()
        let upstream = try TestUpstream { request in
            .hold(until: request.target == "/first" ? first : third, then: .respond(.text(SHA256.hex(of: request.body))))
        }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL,
                                                   config: Self.config(#", "reachability": {"responseTimeoutSeconds": 300}"#))
        let dataDirectory = outbox.directory.file("data")
        // 700 KiB, announced by no length: fits the 1 MiB budget, so it is kept in memory.
        let small = Array(Self.body(1).prefix(700 * 1024))

        let held = try outbox.connect()
        try Self.sendChunked(small, target: "/first", on: held)
        _ = try await upstream.waitForRequests(1, timeout: .seconds(30))
        #expect(Self.openSpillFiles(of: outbox, dataDirectory: dataDirectory).isEmpty, "a body within the budget was spilled")

        // A client that gives up half-way through a 4 MiB upload (spilled from its first byte,
        // the budget being taken): its file goes when its connection does.
        let quitter = try outbox.connect()
        try quitter.send("POST /quit HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(Self.bodySize)\r\n\r\n")
        try quitter.send(Array(Self.body(2).prefix(Self.bodySize / 2)), timeout: .seconds(30))
        #expect(await Self.waitForSpillFiles(1, of: outbox, dataDirectory: dataDirectory) == 1, "\(outbox)")
        quitter.close()
        #expect(await Self.waitForSpillFiles(0, of: outbox, dataDirectory: dataDirectory) == 0,
                "the aborted upload's spill file is still open")

        // The held exchange ends with its answer, and gives its share back: another body of the
        // same size is kept in memory again, not spilled.
        first.open()
        let answered = try held.readResponse(timeout: .seconds(30))
        #expect(answered.status == 200 && answered.bodyText == SHA256.hex(of: small), "\(answered)\n\(outbox)")
        let again = try outbox.connect()
        try Self.sendChunked(small, target: "/third", on: again)
        _ = try await upstream.waitForRequests(2, timeout: .seconds(30))
        #expect(Self.openSpillFiles(of: outbox, dataDirectory: dataDirectory).isEmpty,
                "the budget of the answered exchange did not come back: the next body was spilled")
        third.open()
        let last = try again.readResponse(timeout: .seconds(30))
        #expect(last.status == 200 && last.bodyText == SHA256.hex(of: small), "\(last)\n\(outbox)")
    }
}

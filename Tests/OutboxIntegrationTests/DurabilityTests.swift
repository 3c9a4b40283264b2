import Foundation
import Glibc
import Testing

/// Durability against the real binary: an acknowledged (`202`) write survives `kill -9`, a torn
/// or garbled tail of the newest storage file is cut off at startup with a log line, and the
/// storage is private to its user (files 0600, directory 0700).
@Suite("Durability", .harnessThreads)
struct DurabilityTests {
    /// What the concurrent writers have seen, shared by their threads.
    struct Ledger: Sendable {
        /// Request number → operation id, for every `202` received.
        var acknowledged: [Int: String] = [:]
        /// Requests sent (or about to be) without a response yet.
        var inFlight: Set<Int> = []
        /// Anything but a well-formed `202`.
        var unexpected: [String] = []
        var next = 0
        var finishedWriters = 0
    }

    /// Each write's body and key: request `n` is `d=n` with key `dur-n`.
    static func body(_ n: Int) -> String { "d=\(n)" }
    static func key(_ n: Int) -> String { "dur-\(n)" }

    /// Starts `count` threads, each on its own keep-alive connection, sending writes numbered
    /// from a shared counter until `limit`, a connection error, or an unexpected answer.
    static func startWriters(count: Int, limit: Int, port: UInt16, ledger: WaitableState<Ledger>) {
        for _ in 0..<count {
            Thread {
                defer { ledger.update { $0.finishedWriters += 1 } }
                guard let client = try? RawClient(port: port) else { return }
                while true {
                    let claimed: Int? = ledger.update { state in
                        guard state.next < limit else { return nil }
                        defer { state.next += 1 }
                        state.inFlight.insert(state.next)
                        return state.next
                    }
                    guard let n = claimed else { return }
                    let body = body(n)
                    do {
                        try client.send("POST /items HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nIdempotency-Key: \(key(n))\r\n"
                                        + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
                        let response = try client.readResponse(to: "POST", timeout: .seconds(15))
                        let id = response.headers["Outbox-Operation-Id"]
                        let accepted = response.status == 202 && id != nil && response.headers["Idempotency-Key"] == key(n)
                        ledger.update { state in
                            state.inFlight.remove(n)
                            if accepted, let id { state.acknowledged[n] = id } else { state.unexpected.append("#\(n): \(response)") }
                        }
                        if !accepted || response.announcesClose { return }
                    } catch {
                        // Killed mid-exchange: `n` stays in flight, acknowledged or not.
                        return
                    }
                }
            }.start()
        }
    }

    @Test func acknowledgedWritesSurviveKillNineAndAreDeliveredAfterRestart() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        upstream.stop()
        let home = try TemporaryDirectory()
        let data = home.file("data")
        let config = OutboxProcess.fastQueueConfig()
        let first = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data)

        let writers = 8
        let ledger = WaitableState(Ledger())
        Self.startWriters(count: writers, limit: 2000, port: first.port, ledger: ledger)
        // Kill once 200 are acknowledged, while the writers keep sending more.
        _ = try await ledger.wait(
            timeout: .seconds(40),
            describeTimeout: { "only \($0.acknowledged.count) of 200 acknowledged; unexpected: \($0.unexpected.prefix(3))" },
            until: { $0.acknowledged.count >= 200 || $0.finishedWriters == writers ? true : nil })
        first.terminate(signal: SIGKILL)
        _ = try await ledger.wait(
            timeout: .seconds(20),
            describeTimeout: { "\(writers - $0.finishedWriters) writers still running after kill -9" },
            until: { $0.finishedWriters == writers ? true : nil })
        let exit = try await first.waitForExit()
        #expect(exit == .signaled(SIGKILL), "\(exit)")
        let seen = ledger.value
        try #require(seen.acknowledged.count >= 200,
                     "\(seen.acknowledged.count) acknowledged before the writers stopped; unexpected: \(seen.unexpected.prefix(3))\n\(first)")
        #expect(seen.unexpected.isEmpty, "\(seen.unexpected.prefix(3))")

        #expect(DataDirectoryInspection.permissions(data) == 0o700, "data directory mode \(String(DataDirectoryInspection.permissions(data) ?? 0, radix: 8))")
        let files = DataDirectoryInspection.regularFiles(under: data)
        #expect(!files.isEmpty, "nothing stored under \(data)")
        for file in files {
            #expect(file.mode == 0o600, "\(file.path) has mode \(String(file.mode, radix: 8))")
        }

        try upstream.restart()
        let second = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data)
        try second.drain(timeoutSeconds: 60)

        var deliveries: [String: [RecordedRequest]] = [:]
        for request in upstream.requests {
            deliveries[request.idempotencyKey ?? "(none)", default: []].append(request)
        }
        let missing = seen.acknowledged.keys.sorted().filter { deliveries[Self.key($0)] == nil }
        #expect(missing.isEmpty, "\(missing.count) acknowledged writes never delivered, e.g. \(missing.prefix(10))\n\(second)")
        let known = Set(seen.acknowledged.keys).union(seen.inFlight)
        for (key, copies) in deliveries {
            guard let n = Int(key.dropFirst(4)), key.hasPrefix("dur-"), known.contains(n) else {
                Issue.record("delivered a write nobody sent or acknowledged: key \(key)")
                continue
            }
            #expect(copies.allSatisfy { $0.bodyText == Self.body(n) }, "key \(key) carried \(copies.map(\.bodyText))")
            if copies.count > 1 {
                #expect(seen.inFlight.contains(n), "acknowledged write \(key) delivered \(copies.count) times")
            }
        }
        // An acknowledged write must also still be in the admin API under its original id.
        if let (n, id) = seen.acknowledged.min(by: { $0.key < $1.key }) {
            let detail = try second.operation(id)
            #expect(detail.string("idempotencyKey") == Self.key(n), "\(detail)")
            #expect(detail.string("status") == "completed", "\(detail)")
        }
    }

    @Test func storageIsPrivateToItsUser() async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let home = try TemporaryDirectory()
        let data = home.file("data")
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig(),
                                                   dataDirectory: data)
        for n in 0..<3 {
            _ = try outbox.enqueue(body: "private-\(n)")
        }
        #expect(DataDirectoryInspection.permissions(data) == 0o700)
        let files = DataDirectoryInspection.regularFiles(under: data)
        #expect(!files.isEmpty, "three acknowledged writes, but no file under \(data)")
        for file in files {
            #expect(file.mode == 0o600, "\(file.path) has mode \(String(file.mode, radix: 8))")
        }
    }

    /// How the newest storage file is damaged between the kill and the restart.
    enum Damage: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case appendGarbage
        case truncateLastBytes

        var testDescription: String { rawValue }
    }

    @Test(arguments: Damage.allCases)
    func damagedTailIsCutAtStartupAndEarlierWritesAreDelivered(damage: Damage) async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        upstream.stop()
        let home = try TemporaryDirectory()
        let data = home.file("data")
        let config = OutboxProcess.fastQueueConfig()
        let first = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data)
        let count = 10
        var queued: [QueuedOperation] = []
        for n in 0..<count {
            queued.append(try first.enqueue(body: "tail-\(n)", headers: [HeaderField("Idempotency-Key", "tail-\(n)")]))
        }
        first.terminate(signal: SIGKILL)
        _ = try await first.waitForExit()

        let newest = try #require(DataDirectoryInspection.newestNonEmptyFile(under: data), "no storage file under \(data)")
        switch damage {
        case .appendGarbage:
            try DataDirectoryInspection.append([0x13, 0x37, 0xde, 0xad, 0xbe, 0xef] + Array(repeating: 0xa5, count: 31), to: newest.path)
        case .truncateLastBytes:
            try DataDirectoryInspection.truncateTail(of: newest.path, by: 5)
        }
        // Garbage after the last record costs nothing; a cut into the last record may cost
        // that record only.
        let mustSurvive = damage == .appendGarbage ? count : count - 1

        try upstream.restart()
        let second = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data)
        try second.drain()

        let words = ["torn", "truncat", "corrupt", "cut", "damage", "discard", "checksum"]
        let noticed = nonEmptyLines(second.stderrText).filter { line in
            let lowered = line.lowercased()
            return !lowered.contains("listening") && words.contains { lowered.contains($0) }
        }
        #expect(!noticed.isEmpty, "no log line about the damaged tail of \(newest.path)\n\(second)")

        let delivered = upstream.requests.map(\.bodyText)
        let expected = (0..<mustSurvive).map { "tail-\($0)" }
        #expect(Array(delivered.prefix(mustSurvive)) == expected, "delivered \(delivered)\n\(second)")
        for operation in queued.prefix(mustSurvive) {
            #expect(try second.operation(operation.id).string("status") == "completed")
        }

        // The store takes new writes after the cut, and they are delivered too.
        let after = try second.enqueue(body: "after-cut", headers: [HeaderField("Outbox-Mode", "queue")])
        let done = try await second.waitForOperation(after.id, toBe: ["completed", "failed", "conflict"])
        #expect(done.string("status") == "completed", "\(done)")
        #expect(upstream.requests.last?.bodyText == "after-cut")
    }
}

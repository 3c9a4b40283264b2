import Foundation
import Glibc
import OutboxModel
import Testing

/// Damage in the middle of the storage file, through the real binary (SPEC §6): a few hundred
/// writes queued with the upstream down, `kill -9`, 16 random bytes written into the middle of
/// the file, restart. Every write the bytes did not touch is still listed and is delivered once
/// the upstream is back; `storage_damaged` names the file and offset, `/admin/status` counts
/// the lost records, and the damaged bytes are kept in the data directory (0600).
@Suite("Storage: damage in the middle of the log", .harnessThreads)
struct StorageDamageRecoveryTests {
    static let count = 300

    /// Body `n`: unique, and long enough that 16 bytes can fall inside one record.
    static func body(_ n: Int) -> String { "damage-\(n)-" + String(repeating: "abcdefghij", count: 6) }

    @Test func sixteenRandomBytesInTheMiddle_LoseOnlyTheWritesTheyTouch() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("created", status: 201)) }
        upstream.stop()
        let home = try TemporaryDirectory()
        let data = home.file("data")
        let config = OutboxProcess.fastQueueConfig()
        let first = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data)
        var queued: [QueuedOperation] = []
        for n in 0..<Self.count {
            queued.append(try first.enqueue(body: Self.body(n), headers: [HeaderField("Idempotency-Key", "damage-\(n)")]))
        }
        first.terminate(signal: SIGKILL)
        #expect(try await first.waitForExit() == .signaled(SIGKILL))

        let segment = try #require(DataDirectoryInspection.newestNonEmptyFile(under: data), "no storage file under \(data)")
        let bytes = try #require(FileManager.default.contents(atPath: segment.path).map { [UInt8]($0) })
        // Where each write's record ends: with its body (no response is stored yet), in the
        // order they were queued; a record starts where the one before it ends.
        var ends: [Int] = []
        var searchFrom = 0
        for n in 0..<Self.count {
            let needle = Array(Self.body(n).utf8)
            let at = try #require(Self.find(needle, in: bytes, from: searchFrom), "body \(n) is not in \(segment.path)")
            ends.append(at + needle.count)
            searchFrom = at + needle.count
        }
        let dataEnd = (bytes.lastIndex { $0 != 0 } ?? 0) + 1
        let position = dataEnd / 2
        var random = SeededRandom(seed: 0x27)
        let damage = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
        try Self.write(damage, at: position, to: segment.path)
        let touched = (1..<Self.count).filter { ends[$0 - 1] < position + 16 && position < ends[$0] }
        try #require(!touched.isEmpty && !touched.contains(Self.count - 1), "damage at \(position) touches \(touched)")
        let recordStarts = touched.map { ends[$0 - 1] }

        let second = try await OutboxProcess.start(upstream: upstream.baseURL, config: config, dataDirectory: data)
        let listing = try JSONObject(second.admin("operations?limit=1000"))
        let listed = Set((listing.objects("operations") ?? []).compactMap { $0.string("id") })
        let missing = (0..<Self.count).filter { !listed.contains(queued[$0].id) }
        #expect(!missing.isEmpty, "16 random bytes at \(position) cost nothing (touched \(touched))")
        #expect(Set(missing).isSubset(of: Set(touched)), "lost \(missing), the damage touched only \(touched)\n\(second)")
        #expect(listed.count == Self.count - missing.count, "\(listed.count) listed\n\(second)")

        let status = try JSONObject(second.admin("status"))
        #expect(status.object("storage")?.int("damagedRecords") == missing.count, "\(status)")
        let line = nonEmptyLines(second.stderrText).first { $0.contains("storage_damaged") }
        #expect(line?.contains("file=\(segment.path) ") == true, "\(line ?? "no storage_damaged line")\n\(second)")
        #expect(recordStarts.contains { line?.contains(" offset=\($0) ") == true }, "\(line ?? ""): expected one of \(recordStarts)")
        let aside = DataDirectoryInspection.regularFiles(under: data).filter { $0.path.contains("/damaged/") }
        #expect(aside.count == 1, "\(aside.map(\.path))")
        for file in DataDirectoryInspection.regularFiles(under: data) {
            #expect(file.mode == 0o600, "\(file.path) has mode \(String(file.mode, radix: 8))")
        }

        try upstream.restart()
        try second.drain(timeoutSeconds: 60)
        let delivered = upstream.requests.map(\.bodyText)
        let expected = (0..<Self.count).filter { !missing.contains($0) }.map(Self.body)
        #expect(delivered == expected, "delivered \(delivered.count) of \(expected.count)\n\(second)")
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        return (start...(haystack.count - needle.count)).first { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    static func write(_ bytes: [UInt8], at offset: Int, to path: String) throws {
        let fd = open(path, O_WRONLY)
        guard fd >= 0 else { throw HarnessError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard bytes.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }) == bytes.count else {
            throw HarnessError("cannot write \(path)")
        }
    }
}

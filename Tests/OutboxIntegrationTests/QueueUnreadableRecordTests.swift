import Foundation
import Glibc
import Testing

/// A stored operation whose record on disk can no longer be read is never taken for a free
/// idempotency key: a repeat of its key gets an error, not a `202` for a second operation the
/// queue would not hold.
@Suite("Queue: unreadable records", .harnessThreads)
struct QueueUnreadableRecordTests {
    @Test func repeatOfAKeyWhoseRecordWasDamaged_IsAnError_AndStoresNothingMore() async throws {
        let upstream = try TestUpstream()
        upstream.stop()
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let key = [HeaderField("Idempotency-Key", "k-unreadable")]
        let body = "unreadable-" + String(repeating: "0123456789", count: 8)
        let stored = try outbox.enqueue(body: body, headers: key)

        try Self.flipOneByte(of: Array(body.utf8), under: outbox.directory.file("data"))

        let repeated = try outbox.send("POST", "/items", body: body, headers: key)
        expectErrorResponse(repeated, status: 507, from: outbox)
        #expect(repeated.headers["Outbox-Operation-Id"] == nil, "\(repeated)")
        let status = try JSONObject(outbox.admin("status"))
        #expect(status.object("counts")?.int("pending") == 1, "a second operation was stored: \(status)")
        // Logged before the answer was sent, but the harness reads stderr on its own thread.
        try await outbox.waitForLogLine(containing: ["storage_read_failed", stored.id])
    }

    /// Overwrites, in place, one byte in the middle of `bytes` in the file under `root` that
    /// holds them: the record's checksum no longer matches, wherever the layout put it.
    static func flipOneByte(of bytes: [UInt8], under root: String) throws {
        for file in DataDirectoryInspection.regularFiles(under: root) {
            guard let data = FileManager.default.contents(atPath: file.path), data.count >= bytes.count else { continue }
            let content = [UInt8](data)
            guard let start = (0...(content.count - bytes.count)).first(where: {
                content[$0..<$0 + bytes.count].elementsEqual(bytes)
            }) else { continue }
            let fd = open(file.path, O_WRONLY)
            guard fd >= 0 else { throw HarnessError("cannot open \(file.path): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            var flipped = content[start + bytes.count / 2] ^ 0xFF
            guard pwrite(fd, &flipped, 1, off_t(start + bytes.count / 2)) == 1 else { throw HarnessError("cannot write \(file.path)") }
            return
        }
        throw HarnessError("no file under \(root) holds the request body")
    }
}

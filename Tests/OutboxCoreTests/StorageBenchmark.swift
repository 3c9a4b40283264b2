import Foundation
import Glibc
import OutboxConfig
import OutboxModel
import OutboxQueue
import OutboxStorage
import OutboxTelemetry
import Synchronization
import Testing

/// The storage micro benchmark, run large by `Benchmarks/storage-bench.sh` (release build, with
/// `OUTBOX_STORAGE_BENCH` operations). Prints durable appends/s of 1 KiB operations with 64
/// concurrent appenders, then how long the queue takes to reopen them and the memory its
/// index then holds: the reopen is `OutboxQueue`'s own, the recovery `outbox serve` runs at a
/// restart (records handed to the index as they are read, no list beside it). In the suite it
/// runs small (512 operations), so CI skips nothing: every append of 64 concurrent appenders
/// must come back from the reopen as pending.
/// `OUTBOX_STORAGE_BENCH_THINK_US` makes each appender wait that long after each
/// acknowledgement before its next append (a client's round trip over HTTP).
@Suite struct StorageBenchmark {
    static var operations: Int { Int(ProcessInfo.processInfo.environment["OUTBOX_STORAGE_BENCH"] ?? "") ?? 512 }
    static var thinkMicros: UInt32 { UInt32(ProcessInfo.processInfo.environment["OUTBOX_STORAGE_BENCH_THINK_US"] ?? "") ?? 0 }

    @Test
    func appendThroughputAndReopen() async throws {
        let total = Self.operations
        let appenders = 64
        let base = ProcessInfo.processInfo.environment["OUTBOX_STORAGE_BENCH_DIR"] ?? NSTemporaryDirectory()
        let directory = base + "/outbox-storage-bench-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let logger = Logger(level: .warn)
        let syncs = Atomic(0)
        let io = SegmentIO(write: SegmentIO.system.write, sync: { fd in
            syncs.add(1, ordering: .relaxed)
            return SegmentIO.system.sync(fd)
        })
        let (log, _) = try OperationLog.open(directory: directory, options: .init(io: io), logger: logger)
        let think = Self.thinkMicros
        let origin = Origin(scheme: .http, host: "127.0.0.1", port: 9000)
        let body = [UInt8](repeating: 0x61, count: 1024)
        let started = DispatchTime.now().uptimeNanoseconds
        try await withThrowingTaskGroup(of: Void.self) { group in
            for appender in 0..<appenders {
                group.addTask {
                    var index = appender
                    while index < total {
                        let request = OperationRequest(
                            id: UUID(), origin: origin, method: "POST", target: "/v1/items",
                            headers: [("Host", "127.0.0.1:9000"), ("Content-Type", "application/json"),
                                      ("Idempotency-Key", "k")],
                            body: body, idempotencyKey: UUID().uuidString, fingerprint: [UInt8](repeating: 7, count: 32),
                            priority: .normal, tag: nil, dependsOn: nil, createdAt: Int64(index))
                        _ = try await log.append(.created(request, OperationState()))
                        if think > 0 { try await Task.sleep(nanoseconds: UInt64(think) * 1000) }
                        index += appenders
                    }
                }
            }
            try await group.waitForAll()
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        print(String(format: "storage-bench: %d durable appends of 1 KiB ops, %d appenders (think %u µs): %.2f s, %.0f appends/s, %.1f records per sync, %d MiB on disk",
                     total, appenders, think, seconds, Double(total) / seconds,
                     Double(total) / Double(max(1, syncs.load(ordering: .relaxed))), log.diskBytes >> 20))
        log.close()

        let rssBefore = Self.residentBytes()
        let reopenStart = DispatchTime.now().uptimeNanoseconds
        var config = OutboxConfig()
        config.dataDirectory = directory
        config.queue.maxOperations = max(config.queue.maxOperations, total)
        let queue = try OutboxQueue(config: config, reachability: Reachability(probeIntervalSeconds: 1, probe: { _ in false }),
                                    logger: logger, metrics: Metrics())
        let reopenSeconds = Double(DispatchTime.now().uptimeNanoseconds - reopenStart) / 1e9
        let rssAfter = Self.residentBytes()
        let pending = queue.counts[.pending] ?? 0
        print(String(format: "storage-bench: the queue reopened %d operations in %.2f s; RSS %d MiB → %d MiB (+%d MiB for its index)",
                     pending, reopenSeconds, rssBefore >> 20, rssAfter >> 20, (rssAfter - rssBefore) >> 20))
        #expect(pending == total)
        queue.close()
    }

    static func residentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }
        return 0
    }
}

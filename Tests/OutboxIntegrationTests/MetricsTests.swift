import Foundation
import TestPrerequisites
import Testing

/// `/admin/metrics` in Prometheus text format 0.0.4, checked with the reference parser
/// (Python's prometheus_client, installed by `.ci/run`), and counters that move with traffic.
@Suite("Admin metrics", .harnessThreads)
struct MetricsTests {
    /// A Python with the reference parser (apt's python3-prometheus-client is for
    /// /usr/bin/python3 only).
    static let python = Prerequisite.python(importing: ["prometheus_client"])
    static var parserAvailable: Bool { python != nil }

    /// The samples as the reference parser reads them: `name{labels} value` → value.
    static func parse(_ text: String) async throws -> [String: Double] {
        let directory = try TemporaryDirectory()
        let file = try directory.write(text, to: "metrics.txt")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Scripts/parse_metrics.py").standardizedFileURL.path
        let result = try await ChildProcess.run(try #require(python), [script, file])
        try #require(result.exit == .exited(0), "the Prometheus parser refused the text:\n\(result.stderrText)\n\(text)")
        var samples: [String: Double] = [:]
        for line in result.stdoutText.split(separator: "\n") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        return samples
    }

    @Test(.requires(parserAvailable, "python3 with prometheus_client is not installed (.ci/run installs it)"))
    func metricsParseAndCountersMoveWithTraffic() async throws {
        let upstream = try TestUpstream { _ in .respond(.text("ok", status: 200)) }
        let outbox = try await OutboxProcess.start(upstream: upstream.baseURL, config: OutboxProcess.fastQueueConfig())
        let before = try await Self.parse(try outbox.admin("metrics").bodyText)
        #expect(before["outbox_enqueued_total{}"] == 0)

        #expect(try outbox.send("GET", "/read").status == 200)
        let queued = try outbox.enqueue(body: "x", headers: [HeaderField("Outbox-Mode", "queue")])
        _ = try await outbox.waitForOperation(queued.id, toBe: ["completed"])

        let response = try outbox.admin("metrics")
        #expect(response.headers["Content-Type"]?.hasPrefix("text/plain; version=0.0.4") == true, "\(response)")
        let after = try await Self.parse(response.bodyText)
        #expect(after["outbox_enqueued_total{}"] == 1, "\(after)")
        #expect(after["outbox_forwarded_total{class=\"2xx\"}"] == 1, "\(after)")
        #expect(after["outbox_replayed_total{outcome=\"completed\"}"] == 1, "\(after)")
        #expect(after["outbox_operations{status=\"completed\"}"] == 1, "\(after)")
        #expect(after["outbox_upstream_online{origin=\"http://127.0.0.1:\(upstream.port)\"}"] == 1, "\(after)")
        #expect((after["outbox_request_duration_seconds_count{}"] ?? 0) >= 3, "\(after)")
        #expect((after["outbox_storage_bytes{}"] ?? 0) > 0)
        // The stored request's record and its replay's state records went through group commit.
        let syncs = after["outbox_storage_syncs_total{}"] ?? 0
        #expect(syncs >= 1, "\(after)")
        #expect((after["outbox_storage_synced_records_total{}"] ?? 0) >= syncs, "\(after)")
        #expect((after["outbox_storage_sync_seconds_total{}"] ?? 0) > 0, "\(after)")
        // Each sync's duration, as a histogram (its count may run a batch ahead of the counter above).
        #expect((after["outbox_storage_sync_duration_seconds_count{}"] ?? 0) >= 1, "\(after)")
        #expect((after["outbox_storage_sync_duration_seconds_sum{}"] ?? 0) > 0, "\(after)")
        #expect(after["outbox_storage_sync_duration_seconds_bucket{le=\"0.0001\"}"] != nil, "\(after)")
        #expect(after["outbox_storage_batch_wait_seconds_total{}"] != nil, "\(after)")
        #expect((after["outbox_storage_completion_seconds_total{}"] ?? 0) > 0, "\(after)")
    }
}

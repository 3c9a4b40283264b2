import OutboxModel
import Synchronization

/// Counters for `/admin/metrics`. The per-request ones live in one shard per event loop, so
/// a request bumps only counters no other core writes (shared atomics bounced their cache
/// lines between the loops on every request); a scrape adds the shards up. Gauges (queue
/// sizes, origins online) are read from the queue at scrape.
package final class Metrics: Sendable {
    /// Upper bounds (seconds) of the request duration histogram, Prometheus's defaults.
    static let durationBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// One event loop's request counters: written by that loop only.
    package final class Shard: Sendable {
        fileprivate let forwardedByClass = (0..<6).map { _ in Counter() }  // index = status / 100
        fileprivate let durations = Histogram(bounds: Metrics.durationBuckets)

        /// One answered request: its duration, and its status class when the upstream answered it.
        package func request(nanoseconds: UInt64, forwardedStatus: Int?) {
            durations.observe(micros: Int(nanoseconds / 1000))
            if let status = forwardedStatus, (100..<600).contains(status) {
                forwardedByClass[status / 100].add(1)
            }
        }
    }

    private let shards = Mutex<[Shard]>([])

    /// The log's group commit, counted by its writer and completion threads.
    package let groupCommit = GroupCommitCounters()

    package init() {}

    /// A new shard for one event loop.
    package func makeShard() -> Shard {
        let shard = Shard()
        shards.withLock { $0.append(shard) }
        return shard
    }

    private func total(_ read: (Shard) -> Int) -> Int {
        shards.withLock { $0.reduce(0) { $0 + read($1) } }
    }

    private let enqueuedTotal = Atomic<Int>(0)
    private let replayCompleted = Atomic<Int>(0)
    private let replayConflict = Atomic<Int>(0)
    private let replayFailed = Atomic<Int>(0)
    private let replayRetry = Atomic<Int>(0)
    private let replayAuthRequired = Atomic<Int>(0)

    package func enqueued() { enqueuedTotal.add(1, ordering: .relaxed) }

    // MARK: The PostgreSQL store (SPEC §9)

    /// Set by the PostgreSQL store: its families are rendered only where it runs.
    private let postgresStore = Atomic<Bool>(false)
    private let storeCommitDurations = Histogram(bounds: Metrics.durationBuckets)
    /// Operations per commit: bounds are counts, recorded as if they were seconds.
    private let storeCommitSizes = Histogram(bounds: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
    private let storeErrors = Mutex<[String: Int]>([:])
    private let lanesTakenOver = Atomic<Int>(0)
    /// The store's gauges read at scrape: connections busy, lanes held.
    private let storeGauges = Mutex<(@Sendable () -> (connectionsBusy: Int, connections: Int, lanesHeld: Int))?>(nil)

    /// The PostgreSQL store runs; `gauges` answers its gauges at each scrape.
    package func storeStarted(gauges: @escaping @Sendable () -> (connectionsBusy: Int, connections: Int, lanesHeld: Int)) {
        postgresStore.store(true, ordering: .relaxed)
        storeGauges.withLock { $0 = gauges }
    }

    /// One transaction of the store's group commit: how many writes it carried, how long it took.
    package func storeCommitted(operations: Int, seconds: Double) {
        storeCommitDurations.observe(micros: Int(seconds * 1_000_000))
        storeCommitSizes.observe(micros: operations * 1_000_000)
    }

    /// A statement or connection of the store failed, by kind (`connection`, `timeout`,
    /// `out_of_space`, `conflict`, `statement`).
    package func storeFailed(kind: String) {
        storeErrors.withLock { $0[kind, default: 0] += 1 }
    }

    /// A lane was claimed from an instance whose lease had lapsed.
    package func laneTakenOver() { lanesTakenOver.add(1, ordering: .relaxed) }

    /// One replay attempt's outcome (the operation's new status, or retry).
    package func replayed(_ status: OperationStatus) {
        switch status {
        case .completed: replayCompleted.add(1, ordering: .relaxed)
        case .conflict: replayConflict.add(1, ordering: .relaxed)
        case .failed: replayFailed.add(1, ordering: .relaxed)
        case .pending, .inProgress: replayRetry.add(1, ordering: .relaxed)
        }
    }

    /// A replay attempt answered with a status in `replay.authStatuses`: its operation is held
    /// for fresh credentials (SPEC §10).
    package func replayNeededAuth() { replayAuthRequired.add(1, ordering: .relaxed) }

    /// Prometheus text format 0.0.4: HELP and TYPE for every family, `outbox_` prefix.
    package func render(counts: [OperationStatus: Int], origins: [OriginStatus], activeLanes: [(Origin, Int)] = [],
                oldestPendingAgeSeconds: Double?, storageBytes: Int) -> String {
        var out = ""
        func family(_ name: String, _ type: String, _ help: String, _ samples: [(String, String)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for (labels, value) in samples { out += "\(name)\(labels) \(value)\n" }
        }
        family("outbox_operations", "gauge", "Stored operations by status.",
               OperationStatus.allCases.map { ("{status=\"\($0.rawValue)\"}", String(counts[$0] ?? 0)) })
        family("outbox_enqueued_total", "counter", "Requests stored durably and answered 202.",
               [("", String(enqueuedTotal.load(ordering: .relaxed)))])
        family("outbox_replayed_total", "counter", "Replay attempts by outcome.", [
            ("{outcome=\"completed\"}", String(replayCompleted.load(ordering: .relaxed))),
            ("{outcome=\"conflict\"}", String(replayConflict.load(ordering: .relaxed))),
            ("{outcome=\"failed\"}", String(replayFailed.load(ordering: .relaxed))),
            ("{outcome=\"retry\"}", String(replayRetry.load(ordering: .relaxed))),
        ])
        family("outbox_replay_auth_required_total", "counter",
               "Replay attempts whose credentials the origin refused (replay.authStatuses): held, not failed.",
               [("", String(replayAuthRequired.load(ordering: .relaxed)))])
        family("outbox_forwarded_total", "counter", "Requests answered by the upstream directly, by status class.",
               (1...5).map { index in ("{class=\"\(index)xx\"}", String(total { $0.forwardedByClass[index].load() })) })
        family("outbox_upstream_online", "gauge", "1 when the origin is believed reachable, 0 while it is probed.",
               origins.map { ("{origin=\"\(Metrics.escape($0.origin.description))\"}", $0.online ? "1" : "0") })
        family("outbox_lanes_active", "gauge", "Lanes of the origin with a replay attempt in flight.",
               activeLanes.map { ("{origin=\"\(Metrics.escape($0.0.description))\"}", String($0.1)) })
        family("outbox_oldest_pending_age_seconds", "gauge", "Age of the oldest pending or in-progress operation (0 when none).",
               [("", Metrics.number(oldestPendingAgeSeconds ?? 0))])
        family("outbox_storage_bytes", "gauge", "Bytes of the queue's log files on disk.", [("", String(storageBytes))])
        family("outbox_storage_syncs_total", "counter", "Batches of records written with one write and made durable with one fdatasync.",
               [("", String(groupCommit.batches))])
        family("outbox_storage_synced_records_total", "counter", "Records made durable by those batches.",
               [("", String(groupCommit.records))])
        family("outbox_storage_sync_seconds_total", "counter", "Time spent in those writes and fdatasyncs.",
               [("", Metrics.number(groupCommit.syncSeconds))])
        family("outbox_storage_batch_wait_seconds_total", "counter",
               "Time each batch's oldest record waited for its write to start (behind the sync before).",
               [("", Metrics.number(groupCommit.waitSeconds))])
        family("outbox_storage_completion_seconds_total", "counter",
               "Time spent running the batches' completions after their fdatasync (the next batch's write waits for it).",
               [("", Metrics.number(groupCommit.completionSeconds))])
        family("outbox_storage_sync_duration_seconds", "histogram",
               "Time each batch's write and fdatasync took (the disk's latency as group commit sees it).",
               Histogram.samples([groupCommit.syncDurations], number: Metrics.number))
        family("outbox_request_duration_seconds", "histogram", "Time from a request head to the end of its answer.",
               Histogram.samples(shards.withLock { $0.map(\.durations) }, number: Metrics.number))
        if postgresStore.load(ordering: .relaxed) {
            let gauges = storeGauges.withLock { $0 }?() ?? (connectionsBusy: 0, connections: 0, lanesHeld: 0)
            family("outbox_store_commit_duration_seconds", "histogram",
                   "Time each transaction of the PostgreSQL store's group commit took, COMMIT included.",
                   Histogram.samples([storeCommitDurations], number: Metrics.number))
            family("outbox_store_operations_per_commit", "histogram", "Writes carried by each of those transactions.",
                   Histogram.samples([storeCommitSizes], number: Metrics.number))
            family("outbox_store_connections", "gauge", "Database connections of this instance, and those running a statement now.",
                   [("{state=\"busy\"}", String(gauges.connectionsBusy)), ("{state=\"all\"}", String(gauges.connections))])
            family("outbox_store_errors_total", "counter", "Failed statements and connections of the PostgreSQL store, by kind.",
                   storeErrors.withLock { $0 }.sorted { $0.key < $1.key }.map { ("{kind=\"\($0.key)\"}", String($0.value)) })
            family("outbox_store_lanes_held", "gauge", "Lanes of the shared queue this instance holds claims on.",
                   [("", String(gauges.lanesHeld))])
            family("outbox_store_lanes_taken_over_total", "counter",
                   "Lanes this instance claimed after another instance's lease lapsed.",
                   [("", String(lanesTakenOver.load(ordering: .relaxed)))])
        }
        return out
    }

    private static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    /// Label values escape backslash, quote and newline (text format 0.0.4).
    private static func escape(_ text: String) -> String {
        text.replacingBackslashQuoteNewline()
    }
}

private extension String {
    func replacingBackslashQuoteNewline() -> String {
        var out = ""
        for character in self {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }
}

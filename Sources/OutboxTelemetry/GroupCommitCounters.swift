import Synchronization

/// What the log's group commit did, for `/admin/metrics`: how many batches it made durable,
/// with how many records, and where a batch's time went (waiting for the writer, in the write
/// and `fdatasync`, running its completions, which the next batch waits for). Records per batch
/// and the share of wall time spent syncing say whether the disk or something before or after
/// it is the limit.
package final class GroupCommitCounters: Sendable {
    private let batchCount = Atomic<Int>(0)
    private let recordCount = Atomic<Int>(0)
    private let waitNanos = Atomic<Int>(0)
    private let syncNanos = Atomic<Int>(0)
    private let completionNanos = Atomic<Int>(0)
    /// Each batch's write + `fdatasync`, from 100 µs (an idle local SSD or virtio disk) to
    /// 2.5 s (a disk that stalls; the log warns from 1 s, `storage_sync_slow`).
    static let syncBuckets: [Double] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
    let syncDurations = Histogram(bounds: syncBuckets)

    package init() {}

    /// One batch written and synced: `records` records; its oldest record waited `wait` ns for
    /// the write to start, and the write plus `fdatasync` took `sync` ns.
    package func synced(records: Int, wait: Int, sync: Int) {
        batchCount.add(1, ordering: .relaxed)
        recordCount.add(records, ordering: .relaxed)
        waitNanos.add(wait, ordering: .relaxed)
        syncNanos.add(sync, ordering: .relaxed)
        syncDurations.observe(micros: sync / 1000)
    }

    /// A synced batch's completions took `nanos` ns.
    package func completed(nanos: Int) {
        completionNanos.add(nanos, ordering: .relaxed)
    }

    var batches: Int { batchCount.load(ordering: .relaxed) }
    var records: Int { recordCount.load(ordering: .relaxed) }
    var waitSeconds: Double { Double(waitNanos.load(ordering: .relaxed)) / 1e9 }
    var syncSeconds: Double { Double(syncNanos.load(ordering: .relaxed)) / 1e9 }
    var completionSeconds: Double { Double(completionNanos.load(ordering: .relaxed)) / 1e9 }
}

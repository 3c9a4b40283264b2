import Synchronization

/// What the log's group commit did, for `/admin/metrics`: how many batches it made durable,
/// with how many records, and where a batch's time went (waiting for the writer, in the write
/// and `fdatasync`, waiting for its completions to start). Records per batch and the share of
/// wall time spent syncing say whether the disk or something before or after it is the limit.
package final class GroupCommitCounters: Sendable {
    private let batchCount = Atomic<Int>(0)
    private let recordCount = Atomic<Int>(0)
    private let waitNanos = Atomic<Int>(0)
    private let syncNanos = Atomic<Int>(0)
    private let handOverNanos = Atomic<Int>(0)

    package init() {}

    /// One batch written and synced: `records` records; its oldest record waited `wait` ns for
    /// the write to start, and the write plus `fdatasync` took `sync` ns.
    package func synced(records: Int, wait: Int, sync: Int) {
        batchCount.add(1, ordering: .relaxed)
        recordCount.add(records, ordering: .relaxed)
        waitNanos.add(wait, ordering: .relaxed)
        syncNanos.add(sync, ordering: .relaxed)
    }

    /// A synced batch's completions started `nanos` ns after its `fdatasync` returned.
    package func completionsStarted(after nanos: Int) {
        handOverNanos.add(nanos, ordering: .relaxed)
    }

    var batches: Int { batchCount.load(ordering: .relaxed) }
    var records: Int { recordCount.load(ordering: .relaxed) }
    var waitSeconds: Double { Double(waitNanos.load(ordering: .relaxed)) / 1e9 }
    var syncSeconds: Double { Double(syncNanos.load(ordering: .relaxed)) / 1e9 }
    var handOverSeconds: Double { Double(handOverNanos.load(ordering: .relaxed)) / 1e9 }
}

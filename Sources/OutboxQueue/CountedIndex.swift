import Synchronization

/// The queue's index behind its lock, with the operation count published beside it.
///
/// Every request that is about to be stored checks the count against `queue.maxOperations`.
/// Taking the index's lock for that collided with the log's writer, which holds it while it
/// indexes a batch: the event loop then slept on the (priority-inheriting) futex and paid two
/// context switches for one integer. The count is stored after each locked section, so a
/// reader sees the value of the last section to finish, as it would under the lock.
final class CountedIndex: Sendable {
    private let index: Mutex<QueueIndex<OperationRecords>>
    private let published: Atomic<Int>

    init(_ index: consuming QueueIndex<OperationRecords>) {
        published = Atomic(index.count)
        self.index = Mutex(index)
    }

    /// Runs `body` under the lock, then publishes the count it left.
    func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout QueueIndex<OperationRecords>) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        try index.withLock { (index: inout QueueIndex<OperationRecords>) throws(E) -> sending Result in
            defer { published.store(index.count, ordering: .releasing) }
            return try body(&index)
        }
    }

    /// Operations indexed, without the lock (may trail a section that is running).
    var count: Int { published.load(ordering: .acquiring) }
}

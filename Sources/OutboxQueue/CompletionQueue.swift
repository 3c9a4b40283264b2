/// Completed operations by completion time (a binary min-heap of index slots and times), so
/// the retention sweep looks only at what is due instead of at every record: a full scan of a
/// million records held the index's lock for milliseconds every second.
///
/// An entry is a hint, checked against its record when read: an operation retried after it
/// completed, deleted, or completed again leaves a stale entry, dropped once it reaches the
/// top. Slots are stable until the index drops its tombstones, which rebuilds the heap.
struct CompletionQueue: Sendable {
    private struct Entry: Sendable {
        var completedAt: Int64
        var slot: Int32
    }

    private var heap: [Entry] = []

    /// Bytes its storage takes (16 per completed operation).
    var footprintBytes: Int { heap.capacity * MemoryLayout<Entry>.stride }

    mutating func append(_ slot: Int32, completedAt: Int64) {
        heap.append(Entry(completedAt: completedAt, slot: slot))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].completedAt < heap[parent].completedAt else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Drops stale entries from the top (`isCurrent` false), then calls `visit` for every
    /// entry completed before `cutoff`, in no particular order.
    mutating func sweep(before cutoff: Int64, isCurrent: (_ slot: Int32, _ completedAt: Int64) -> Bool,
                        visit: (Int32) -> Void) {
        while let top = heap.first, !isCurrent(top.slot, top.completedAt) { removeTop() }
        // A subtree's root is its oldest entry: below a root at or after the cutoff, nothing is due.
        var stack: [Int] = heap.isEmpty ? [] : [0]
        while let index = stack.popLast() {
            let entry = heap[index]
            guard entry.completedAt < cutoff else { continue }
            if isCurrent(entry.slot, entry.completedAt) { visit(entry.slot) }
            if 2 * index + 1 < heap.count { stack.append(2 * index + 1) }
            if 2 * index + 2 < heap.count { stack.append(2 * index + 2) }
        }
    }

    /// Replaces the entries with `entries`.
    mutating func rebuild(_ entries: [(slot: Int32, completedAt: Int64)]) {
        heap = entries.map { Entry(completedAt: $0.completedAt, slot: $0.slot) }.sorted { $0.completedAt < $1.completedAt }
    }

    private mutating func removeTop() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].completedAt < heap[smallest].completedAt { smallest = left }
            if right < heap.count, heap[right].completedAt < heap[smallest].completedAt { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}

/// A binary min-heap of entry slots for one (origin, priority) lane, ordered by slot number,
/// which is creation order. Each slot's position is kept in a shared `positions` array so a
/// slot can be removed from the middle in O(log n) (an operation leaving `pending`).
struct LaneHeap: Sendable {
    private(set) var slots: [Int32] = []

    /// The oldest slot, or nil when the heap is empty.
    var first: Int32? { slots.first }

    var isEmpty: Bool { slots.isEmpty }

    mutating func insert(_ slot: Int32, positions: inout [Int32]) {
        slots.append(slot)
        positions[Int(slot)] = Int32(slots.count - 1)
        siftUp(slots.count - 1, positions: &positions)
    }

    mutating func remove(_ slot: Int32, positions: inout [Int32]) {
        let index = Int(positions[Int(slot)])
        guard index >= 0, index < slots.count, slots[index] == slot else { return }
        positions[Int(slot)] = -1
        let last = slots.removeLast()
        guard index < slots.count else { return }
        slots[index] = last
        positions[Int(last)] = Int32(index)
        siftDown(index, positions: &positions)
        siftUp(index, positions: &positions)
    }

    private mutating func siftUp(_ start: Int, positions: inout [Int32]) {
        var index = start
        while index > 0 {
            let parent = (index - 1) / 2
            guard slots[index] < slots[parent] else { return }
            swapAt(index, parent, positions: &positions)
            index = parent
        }
    }

    private mutating func siftDown(_ start: Int, positions: inout [Int32]) {
        var index = start
        while true {
            let left = 2 * index + 1
            guard left < slots.count else { return }
            var smallest = left
            if left + 1 < slots.count, slots[left + 1] < slots[left] { smallest = left + 1 }
            guard slots[smallest] < slots[index] else { return }
            swapAt(index, smallest, positions: &positions)
            index = smallest
        }
    }

    private mutating func swapAt(_ a: Int, _ b: Int, positions: inout [Int32]) {
        slots.swapAt(a, b)
        positions[Int(slots[a])] = Int32(a)
        positions[Int(slots[b])] = Int32(b)
    }
}

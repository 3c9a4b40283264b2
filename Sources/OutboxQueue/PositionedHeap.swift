/// What a `PositionedHeap` holds: ordered by `<`, and numbered by `slot`, the index of the
/// member's entry in the shared `positions` array (a member is in at most one heap at a time).
protocol HeapMember: Comparable, Sendable {
    var slot: Int { get }
}

/// A binary min-heap whose members' positions are kept in a shared `positions` array, so a
/// member can be removed from the middle in O(log n) (an operation leaving `pending`, a lane
/// whose head changed).
struct PositionedHeap<Member: HeapMember>: Sendable {
    private(set) var members: [Member] = []

    /// The least member, or nil when the heap is empty.
    var first: Member? { members.first }

    var isEmpty: Bool { members.isEmpty }

    mutating func insert(_ member: Member, positions: inout [Int32]) {
        members.append(member)
        positions[member.slot] = Int32(members.count - 1)
        siftUp(members.count - 1, positions: &positions)
    }

    /// Removes the member numbered `slot`, if it is in this heap.
    @discardableResult
    mutating func remove(slot: Int, positions: inout [Int32]) -> Member? {
        let index = Int(positions[slot])
        guard index >= 0, index < members.count, members[index].slot == slot else { return nil }
        positions[slot] = -1
        let removed = members[index]
        let last = members.removeLast()
        guard index < members.count else { return removed }
        members[index] = last
        positions[last.slot] = Int32(index)
        siftDown(index, positions: &positions)
        siftUp(index, positions: &positions)
        return removed
    }

    /// Visits members least first without changing the heap, while `visit` returns true;
    /// returns false when `visit` stopped it. O(k log k) for the first k members: the next
    /// least is always a child of one visited, so only those children are kept aside.
    func visitInOrder(_ visit: (Member) -> Bool) -> Bool {
        guard !members.isEmpty else { return true }
        // A small binary heap of indices into `members`, ordered by the members they name.
        var frontier: [Int] = [0]
        func less(_ a: Int, _ b: Int) -> Bool { members[frontier[a]] < members[frontier[b]] }
        while let least = frontier.first {
            if !visit(members[least]) { return false }
            let last = frontier.removeLast()
            if !frontier.isEmpty {
                frontier[0] = last
                var index = 0
                while true {
                    let left = 2 * index + 1
                    guard left < frontier.count else { break }
                    var smallest = left
                    if left + 1 < frontier.count, less(left + 1, left) { smallest = left + 1 }
                    guard less(smallest, index) else { break }
                    frontier.swapAt(index, smallest)
                    index = smallest
                }
            }
            for child in (2 * least + 1)...(2 * least + 2) where child < members.count {
                frontier.append(child)
                var index = frontier.count - 1
                while index > 0, less(index, (index - 1) / 2) {
                    frontier.swapAt(index, (index - 1) / 2)
                    index = (index - 1) / 2
                }
            }
        }
        return true
    }

    private mutating func siftUp(_ start: Int, positions: inout [Int32]) {
        var index = start
        while index > 0 {
            let parent = (index - 1) / 2
            guard members[index] < members[parent] else { return }
            swapAt(index, parent, positions: &positions)
            index = parent
        }
    }

    private mutating func siftDown(_ start: Int, positions: inout [Int32]) {
        var index = start
        while true {
            let left = 2 * index + 1
            guard left < members.count else { return }
            var smallest = left
            if left + 1 < members.count, members[left + 1] < members[left] { smallest = left + 1 }
            guard members[smallest] < members[index] else { return }
            swapAt(index, smallest, positions: &positions)
            index = smallest
        }
    }

    private mutating func swapAt(_ a: Int, _ b: Int, positions: inout [Int32]) {
        members.swapAt(a, b)
        positions[members[a].slot] = Int32(a)
        positions[members[b].slot] = Int32(b)
    }
}

/// Entry slots are their own order: slot number is creation order.
extension Int32: HeapMember {
    var slot: Int { Int(self) }
}

/// The pending operations of one (lane, priority) that are free to go, oldest first.
typealias LaneHeap = PositionedHeap<Int32>

extension LaneHeap {
    var slots: [Int32] { members }

    mutating func remove(_ slot: Int32, positions: inout [Int32]) {
        remove(slot: Int(slot), positions: &positions)
    }
}

/// A lane waiting its turn in its origin's schedule: ordered by `key` (a turn number in the
/// ready heap, a time in the backoff heap), then by lane number so that equal keys keep a
/// fixed order.
struct ScheduledLane: HeapMember {
    var key: Int64
    var lane: UInt32

    var slot: Int { Int(lane) }

    static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.key, lhs.lane) < (rhs.key, rhs.lane)
    }
}

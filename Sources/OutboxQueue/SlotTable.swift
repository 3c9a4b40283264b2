/// An open-addressing hash set of entry slots (linear probing, backward-shift deletion),
/// holding only 4-byte slot numbers: the keys themselves live in the entries, so a lookup
/// hashes the key, probes, and lets the caller compare the entry at each slot.
///
/// A `Dictionary<UUID, Int32>` would cost about 40 bytes per operation at a million entries;
/// this costs 8–16 (capacity is kept between 2× and 4× the count).
struct SlotTable: Sendable {
    private static let empty: Int32 = -1
    private var buckets: [Int32] = Array(repeating: -1, count: 16)
    private(set) var count = 0

    private var mask: Int { buckets.count - 1 }

    /// The slot whose key matches, probing from `hash`.
    func find(hash: Int, matches: (Int32) -> Bool) -> Int32? {
        var index = hash & mask
        while true {
            let slot = buckets[index]
            if slot == Self.empty { return nil }
            if matches(slot) { return slot }
            index = (index + 1) & mask
        }
    }

    /// Adds `slot` (not already present); `hashOf` gives any stored slot's hash for growing.
    mutating func insert(_ slot: Int32, hash: Int, hashOf: (Int32) -> Int) {
        if (count + 1) * 2 > buckets.count {
            rebuild(capacityFor: count + 1, slots: buckets.filter { $0 != Self.empty }, hashOf: hashOf)
        }
        place(slot, hash: hash)
        count += 1
    }

    /// Removes `slot`, found by its `hash`; `hashOf` gives the hash of slots shifted back.
    mutating func remove(_ slot: Int32, hash: Int, hashOf: (Int32) -> Int) {
        var hole = hash & mask
        while buckets[hole] != slot {
            if buckets[hole] == Self.empty { return }
            hole = (hole + 1) & mask
        }
        buckets[hole] = Self.empty
        count -= 1
        // Backward shift: move later members of the probe run into the hole when their home
        // bucket does not lie cyclically within (hole, index], so every lookup still finds them.
        var index = (hole + 1) & mask
        while buckets[index] != Self.empty {
            let home = hashOf(buckets[index]) & mask
            let inRange = hole <= index ? (home > hole && home <= index) : (home > hole || home <= index)
            if !inRange {
                buckets[hole] = buckets[index]
                buckets[index] = Self.empty
                hole = index
            }
            index = (index + 1) & mask
        }
    }

    /// Replaces the contents with `slots`, sized for `wanted` members at a load of at most ½.
    mutating func rebuild(capacityFor wanted: Int, slots: some Sequence<Int32>, hashOf: (Int32) -> Int) {
        var capacity = 16
        while capacity < wanted * 2 { capacity <<= 1 }
        buckets = Array(repeating: Self.empty, count: capacity)
        count = 0
        for slot in slots {
            place(slot, hash: hashOf(slot))
            count += 1
        }
    }

    /// Bytes held by the bucket array.
    var footprint: Int { buckets.capacity * MemoryLayout<Int32>.stride }

    private mutating func place(_ slot: Int32, hash: Int) {
        var index = hash & mask
        while buckets[index] != Self.empty { index = (index + 1) & mask }
        buckets[index] = slot
    }
}

import Foundation

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

    /// True when one more member would take the load above ½: `grow` before inserting.
    var isFull: Bool { (count + 1) * 2 > buckets.count }

    /// Doubles the buckets; `hashOf` gives any stored slot's hash.
    mutating func grow(hashOf: (Int32) -> Int) {
        rebuild(capacityFor: count + 1, slots: buckets.filter { $0 != Self.empty }, hashOf: hashOf)
    }

    /// Adds `slot` (not already present) to a table that is not full.
    mutating func insert(_ slot: Int32, hash: Int) {
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
        buckets = Array(unsafeUninitializedCapacity: capacity) { storage, initialized in
            HugePages.advise(UnsafeMutableRawPointer(storage.baseAddress), byteCount: capacity * MemoryLayout<Int32>.stride)
            storage.initialize(repeating: Self.empty)
            initialized = capacity
        }
        count = 0
        for slot in slots {
            place(slot, hash: hashOf(slot))
            count += 1
        }
    }

    /// Bytes held by the bucket array.
    var footprint: Int { buckets.capacity * MemoryLayout<Int32>.stride }

    /// A 128-bit UUID folded and mixed into a bucket hash (the splitmix64 finalizer): version-4
    /// ids are random already, and the mix spreads ids that are not (tests, other versions).
    /// `seed` keeps values a client chooses from being aimed at one bucket.
    static func mix(_ id: UUID, seed: UInt64) -> Int {
        let (high, low) = withUnsafeBytes(of: id.uuid) { ($0.loadUnaligned(as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) }
        var z = (high ^ seed) ^ (low &* 0x9E37_79B9_7F4A_7C15)
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int(truncatingIfNeeded: z ^ (z >> 31))
    }

    private mutating func place(_ slot: Int32, hash: Int) {
        var index = hash & mask
        while buckets[index] != Self.empty { index = (index + 1) & mask }
        buckets[index] = slot
    }
}

import Foundation

/// An open-addressing hash set of entry slots (linear probing, backward-shift deletion),
/// holding only 4-byte slot numbers: the keys themselves live in the entries, so a lookup
/// hashes the key, probes, and lets the caller compare the entry at each slot.
///
/// A `Dictionary<UUID, Int32>` would cost about 40 bytes per operation at a million entries;
/// this costs 8–16 (capacity is kept between 2× and 4× the count).
///
/// Growing does not rehash at once: the old buckets stay as they are (`draining`) and
/// ``drain(hashOf:)`` moves a few of them into the new array after each insert, so no single
/// insert pays for the whole table. Rehashing half a million members in one go held the
/// queue's index lock for tens of milliseconds, every event loop waiting on it (a durable POST
/// took 78 ms at the 2^19th operation). Every member is in exactly one of the two arrays; one
/// moved out of `draining`, or removed while there, leaves `moved` behind, which keeps the
/// probe runs there unbroken.
struct SlotTable: Sendable {
    private static let empty: Int32 = -1
    private static let moved: Int32 = -2
    /// Old buckets moved per insert while draining. A growth leaves the table ¼ full, so the
    /// next one is at least half the old capacity in inserts away; four per insert empty the
    /// old array in half of that.
    private static let drainStep = 4
    private var buckets: [Int32] = Array(repeating: -1, count: 16)
    /// The buckets before the last growth, until every member is moved out; empty otherwise.
    private var draining: [Int32] = []
    /// The first bucket of `draining` not yet moved.
    private var drained = 0
    /// Members in both arrays.
    private(set) var count = 0

    private var mask: Int { buckets.count - 1 }

    /// The slot whose key matches, probing from `hash` (in the old buckets too while they drain).
    func find(hash: Int, matches: (Int32) -> Bool) -> Int32? {
        var index = hash & mask
        while true {
            let slot = buckets[index]
            if slot == Self.empty { break }
            if matches(slot) { return slot }
            index = (index + 1) & mask
        }
        guard isDraining else { return nil }
        let oldMask = draining.count - 1
        index = hash & oldMask
        while true {
            let slot = draining[index]
            if slot == Self.empty { return nil }
            if slot != Self.moved, matches(slot) { return slot }
            index = (index + 1) & oldMask
        }
    }

    /// True when one more member would take the load above ½: `grow` before inserting.
    var isFull: Bool { (count + 1) * 2 > buckets.count }

    /// Whether old buckets are still to be moved: call ``drain(hashOf:)`` after inserting.
    var isDraining: Bool { !draining.isEmpty }

    /// Doubles the buckets; the members move over a few at a time (``drain(hashOf:)``). A
    /// growth while the previous one still drains finishes that one first.
    mutating func grow(hashOf: (Int32) -> Int) {
        while isDraining { drain(hashOf: hashOf) }
        draining = Self.emptyBuckets(buckets.count * 2)
        swap(&draining, &buckets)
        drained = 0
    }

    /// Moves the next few old buckets' members into the new array.
    mutating func drain(hashOf: (Int32) -> Int) {
        let end = min(drained + Self.drainStep, draining.count)
        while drained < end {
            let slot = draining[drained]
            if slot >= 0 {
                place(slot, hash: hashOf(slot))
                draining[drained] = Self.moved
            }
            drained += 1
        }
        if drained == draining.count {
            draining = []
            drained = 0
        }
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
            if buckets[hole] == Self.empty {
                removeDraining(slot, hash: hash)
                return
            }
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

    /// Removes `slot` from the old buckets, if it is still there: marked moved, so the probe
    /// runs through it stay whole (no shifting in an array that only empties).
    private mutating func removeDraining(_ slot: Int32, hash: Int) {
        guard isDraining else { return }
        let oldMask = draining.count - 1
        var index = hash & oldMask
        while draining[index] != slot {
            if draining[index] == Self.empty { return }
            index = (index + 1) & oldMask
        }
        draining[index] = Self.moved
        count -= 1
    }

    /// Replaces the contents with `slots`, sized for `wanted` members at a load of at most ½.
    mutating func rebuild(capacityFor wanted: Int, slots: some Sequence<Int32>, hashOf: (Int32) -> Int) {
        var capacity = 16
        while capacity < wanted * 2 { capacity <<= 1 }
        buckets = Self.emptyBuckets(capacity)
        draining = []
        drained = 0
        count = 0
        for slot in slots {
            place(slot, hash: hashOf(slot))
            count += 1
        }
    }

    private static func emptyBuckets(_ capacity: Int) -> [Int32] {
        Array(unsafeUninitializedCapacity: capacity) { storage, initialized in
            HugePages.advise(UnsafeMutableRawPointer(storage.baseAddress), byteCount: capacity * MemoryLayout<Int32>.stride)
            storage.initialize(repeating: Self.empty)
            initialized = capacity
        }
    }

    /// Bytes held by the bucket arrays.
    var footprint: Int { (buckets.capacity + draining.capacity) * MemoryLayout<Int32>.stride }

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

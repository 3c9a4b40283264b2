@testable import OutboxQueue
import Testing

/// The slot table grows without rehashing at once: the old buckets drain into the new ones a
/// few per insert. Whatever the phase, every member must be found, nothing removed may be, and
/// the count must hold.
@Suite("Slot table: growth that drains")
struct SlotTableTests {
    /// Keys of slots, hashed by a Fibonacci multiply; equal keys hash alike, so the first test
    /// gives three slots each key to make probe runs in both arrays.
    private final class Keys {
        var values: [Int] = []
        func hash(_ slot: Int32) -> Int { Int(truncatingIfNeeded: UInt64(values[Int(slot)]) &* 0x9E37_79B9_7F4A_7C15 >> 20) }
    }

    private static func contents(_ table: SlotTable, _ keys: Keys, present: Set<Int32>, removed: Set<Int32>) -> [String] {
        var problems: [String] = []
        for slot in present where table.find(hash: keys.hash(slot), matches: { $0 == slot }) == nil {
            problems.append("slot \(slot) is not found")
        }
        for slot in removed where table.find(hash: keys.hash(slot), matches: { $0 == slot }) != nil {
            problems.append("removed slot \(slot) is found")
        }
        if table.count != present.count { problems.append("count \(table.count), \(present.count) present") }
        return problems
    }

    @Test func everyMemberIsFound_ThroughGrowthsWithRemovalsWhileDraining() {
        var table = SlotTable()
        let keys = Keys()
        var present = Set<Int32>()
        var removed = Set<Int32>()
        var growths = 0
        var removalsWhileDraining = 0
        for next in 0..<5_000 {
            let slot = Int32(next)
            keys.values.append(next / 3)
            if table.isFull {
                table.grow(hashOf: keys.hash)
                growths += 1
            }
            table.insert(slot, hash: keys.hash(slot))
            present.insert(slot)
            // Every third insert removes an older member: while draining, that member may sit in
            // either array.
            if next % 3 == 2, let victim = present.first(where: { $0 % 5 == Int32(next % 5) }) {
                if table.isDraining { removalsWhileDraining += 1 }
                table.remove(victim, hash: keys.hash(victim), hashOf: keys.hash)
                present.remove(victim)
                removed.insert(victim)
            }
            if table.isDraining { table.drain(hashOf: keys.hash) }
            // Checked in full around every growth, sampled elsewhere (the full check is O(n)).
            if table.isDraining || next % 97 == 0 {
                let problems = Self.contents(table, keys, present: present, removed: removed)
                #expect(problems.isEmpty, "after inserting slot \(slot): \(problems.prefix(5))")
                if !problems.isEmpty { return }
            }
        }
        #expect(growths >= 8, "only \(growths) growths")
        #expect(removalsWhileDraining > 100, "only \(removalsWhileDraining) removals while draining")
        #expect(!table.isDraining || table.count > 0)
        #expect(Self.contents(table, keys, present: present, removed: removed).isEmpty)
    }

    @Test func drainingFinishes_BeforeTheNextGrowthIsDue() {
        var table = SlotTable()
        let keys = Keys()
        for next in 0..<70_000 {
            let slot = Int32(next)
            keys.values.append(next)
            if table.isFull {
                #expect(!table.isDraining, "growth due at \(next) while the last one still drains")
                table.grow(hashOf: keys.hash)
            }
            table.insert(slot, hash: keys.hash(slot))
            if table.isDraining { table.drain(hashOf: keys.hash) }
        }
    }
}

import Glibc

/// Asks the kernel to back a large table with 2 MiB pages before it is first touched.
///
/// The index's record array and slot tables are read at random (every lookup by id or key
/// lands on an unrelated page): with 4 KiB pages a million-entry table spans tens of thousands
/// of pages, and nearly every lookup at recovery missed the TLB as well as the cache (a page
/// walk, and a two-level one under a hypervisor). With transparent huge pages in `madvise`
/// mode, this advice is what makes those tables use huge pages; the memory used is the same
/// (the tables are filled densely). Only advice: when the kernel declines, nothing changes.
enum HugePages {
    static let size = 2 << 20

    /// Advises the whole 2 MiB pages inside `bytes` (none when it is smaller than two).
    static func advise(_ base: UnsafeMutableRawPointer?, byteCount: Int) {
        guard let base, byteCount >= 2 * size else { return }
        let start = (Int(bitPattern: base) + size - 1) & ~(size - 1)
        let end = (Int(bitPattern: base) + byteCount) & ~(size - 1)
        guard end > start, let aligned = UnsafeMutableRawPointer(bitPattern: start) else { return }
        _ = madvise(aligned, end - start, MADV_HUGEPAGE)
    }
}

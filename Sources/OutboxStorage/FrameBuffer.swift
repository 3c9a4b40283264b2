import Glibc

/// Frames waiting for the log's writer, back to back in one allocation that grows by doubling.
///
/// An append encodes its record straight into the room ``extend(by:)`` hands out, under the
/// append queue's lock, instead of into an array of its own that is then copied in and freed:
/// that allocation, copy and release were about 1 300 instructions of every durable `202`.
/// The writer swaps the whole buffer for its empty one, as it did with arrays. Not thread-safe:
/// it is only touched under that lock, or by the writer once swapped out.
final class FrameBuffer: @unchecked Sendable {
    private var base: UnsafeMutableRawPointer
    /// Bytes allocated, from `base`.
    private(set) var capacity: Int
    /// Bytes written, from `base`.
    private(set) var count = 0

    init(capacity: Int = 64 << 10) {
        self.capacity = max(capacity, 64)
        base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    /// The bytes written so far; valid until the buffer next changes.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Where `bytes` start, for the writer to complete the frames' headers in place; nil when empty.
    var mutableBase: UnsafeMutableRawPointer? { count > 0 ? base : nil }

    /// `size` more bytes at the end, counted as written: the caller fills all of them.
    func extend(by size: Int) -> UnsafeMutableRawBufferPointer {
        reserve(count + size)
        let region = UnsafeMutableRawBufferPointer(start: base + count, count: size)
        count += size
        return region
    }

    func append(_ source: UnsafeRawBufferPointer) {
        guard let start = source.baseAddress, !source.isEmpty else { return }
        extend(by: source.count).baseAddress!.copyMemory(from: start, byteCount: source.count)
    }

    /// Drops the first `prefix` bytes, moving the rest to the front.
    func removeFirst(_ prefix: Int) {
        precondition(prefix <= count, "removing \(prefix) of \(count) bytes")
        memmove(base, base + prefix, count - prefix)
        count -= prefix
    }

    /// Drops the last `suffix` bytes (a frame that could not be encoded after all).
    func removeLast(_ suffix: Int) {
        precondition(suffix <= count, "removing \(suffix) of \(count) bytes")
        count -= suffix
    }

    /// Empties the buffer, keeping its memory.
    func removeAll() { count = 0 }

    private func reserve(_ needed: Int) {
        guard needed > capacity else { return }
        var grown = capacity
        while grown < needed { grown *= 2 }
        let memory = UnsafeMutableRawPointer.allocate(byteCount: grown, alignment: 16)
        memory.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = memory
        capacity = grown
    }
}

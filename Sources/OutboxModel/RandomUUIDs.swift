import Foundation
import Glibc

/// Time-ordered random UUIDs (version 7, RFC 9562) for one thread: the first 48 bits are the
/// Unix time in milliseconds, the other 74 free bits come from a buffer of kernel randomness
/// refilled 4 KiB at a time (256 UUIDs per `getrandom`). Foundation's `UUID()` opens, reads and
/// closes `/dev/urandom` for every UUID: three system calls, measured at about 7 % of the CPU of
/// a forwarded POST, which gets a generated idempotency key unless the client sent one.
///
/// Time first, because operation ids and generated keys are the keys of the PostgreSQL store's
/// unique indexes: ids made one after another land at the right edge of the B-tree instead of on
/// a random leaf each, which measured about a sixth less of the database's CPU per durable `202`
/// (docs/performance.md). 74 random bits keep an id or key as unguessable as anyone needs; the
/// time they reveal is the operation's `queuedAt`, which the admin API shows anyway.
///
/// Not thread-safe: each event loop owns one. The bytes are the kernel's CSPRNG output.
package final class RandomUUIDs {
    private static let poolBytes = 4096
    private let pool = UnsafeMutableRawPointer.allocate(byteCount: RandomUUIDs.poolBytes, alignment: 16)
    /// Bytes of `pool` already handed out; a full count means "refill before use".
    private var used = RandomUUIDs.poolBytes

    package init() {}

    deinit { pool.deallocate() }

    /// A new UUID: the time `clock` gives (milliseconds since the epoch; the wall clock unless a
    /// test says otherwise), the version nibble 7, the RFC 9562 variant bits, and random bits.
    package func next(millis clock: () -> Int64 = WallClock.millis) -> UUID {
        if used == RandomUUIDs.poolBytes {
            // arc4random_buf reads getrandom(2) and cannot fail (it aborts where the kernel has
            // no randomness to give, which no UUID source could survive either).
            arc4random_buf(pool, RandomUUIDs.poolBytes)
            used = 0
        }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let millis = UInt64(clamping: clock())
        withUnsafeMutableBytes(of: &value) { bytes in
            bytes.copyMemory(from: UnsafeRawBufferPointer(start: pool + used, count: 16))
            // 48 bits, big-endian, so that the text and the bytes sort by time.
            for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: millis >> (8 * (5 - index))) }
            bytes[6] = (bytes[6] & 0x0F) | 0x70
            bytes[8] = (bytes[8] & 0x3F) | 0x80
        }
        used += 16
        return UUID(uuid: value)
    }
}

import Foundation
import Glibc

/// Random (version 4) UUIDs for one thread, cut from a buffer of kernel randomness refilled
/// 4 KiB at a time (256 UUIDs per `getrandom`). Foundation's `UUID()` opens, reads and closes
/// `/dev/urandom` for every UUID: three system calls, measured at about 7 % of the CPU of a
/// forwarded POST, which gets a generated idempotency key unless the client sent one.
///
/// Not thread-safe: each event loop owns one. The bytes are the kernel's CSPRNG output, so a
/// UUID from here is as unpredictable as Foundation's.
package final class RandomUUIDs {
    private static let poolBytes = 4096
    private let pool = UnsafeMutableRawPointer.allocate(byteCount: RandomUUIDs.poolBytes, alignment: 16)
    /// Bytes of `pool` already handed out; a full count means "refill before use".
    private var used = RandomUUIDs.poolBytes

    package init() {}

    deinit { pool.deallocate() }

    /// A new random UUID: 122 random bits, the version nibble 4 and the RFC 9562 variant bits.
    package func next() -> UUID {
        if used == RandomUUIDs.poolBytes {
            // arc4random_buf reads getrandom(2) and cannot fail (it aborts where the kernel has
            // no randomness to give, which no UUID source could survive either).
            arc4random_buf(pool, RandomUUIDs.poolBytes)
            used = 0
        }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { bytes in
            bytes.copyMemory(from: UnsafeRawBufferPointer(start: pool + used, count: 16))
            bytes[6] = (bytes[6] & 0x0F) | 0x40
            bytes[8] = (bytes[8] & 0x3F) | 0x80
        }
        used += 16
        return UUID(uuid: value)
    }
}

import OutboxModel

/// A deterministic pseudo-random body of `count` bytes (SplitMix64 keyed by `seed`): the test
/// upstream streams it and the test recomputes its digest, so neither side holds 64 MiB.
struct GeneratedBody: Sendable, Equatable {
    let count: Int
    let seed: UInt64

    /// Creates the description of a body; no bytes are produced until `makeStream()` is read.
    init(count: Int, seed: UInt64) {
        self.count = count
        self.seed = seed
    }

    /// A reader producing the body from its first byte.
    func makeStream() -> Stream {
        Stream(remaining: count, state: seed)
    }

    /// The SHA-256 of the whole body, computed by streaming it through the hash.
    func sha256Hex() -> String {
        var stream = makeStream()
        var hasher = SHA256()
        var block = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let produced = stream.read(into: &block)
            if produced == 0 { break }
            block.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<produced])) }
        }
        return hasher.finalizeHex()
    }

    /// The body as a byte stream; reads fill whole 8-byte words except for the final one.
    struct Stream: Sendable {
        private(set) var remaining: Int
        private var state: UInt64

        fileprivate init(remaining: Int, state: UInt64) {
            self.remaining = remaining
            self.state = state
        }

        /// Fills the front of `buffer` (whose size must be a multiple of 8) with the next bytes
        /// and returns how many; 0 at the end.
        mutating func read(into buffer: inout [UInt8]) -> Int {
            let produced = min(buffer.count, remaining)
            var state = self.state
            buffer.withUnsafeMutableBytes { raw in
                var offset = 0
                while offset < produced {
                    // SplitMix64 (Steele, Lea, Flood 2014): fast, and any seed gives a full stream.
                    state &+= 0x9e37_79b9_7f4a_7c15
                    var mixed = state
                    mixed = (mixed ^ (mixed >> 30)) &* 0xbf58_476d_1ce4_e5b9
                    mixed = (mixed ^ (mixed >> 27)) &* 0x94d0_49bb_1331_11eb
                    mixed ^= mixed >> 31
                    let take = min(8, produced - offset)
                    for byteIndex in 0..<take {
                        raw[offset + byteIndex] = UInt8(truncatingIfNeeded: mixed >> UInt64(byteIndex * 8))
                    }
                    offset += take
                }
            }
            self.state = state
            remaining -= produced
            return produced
        }
    }
}

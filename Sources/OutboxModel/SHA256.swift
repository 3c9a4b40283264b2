/// FIPS 180-4 SHA-256, small and dependency free (Foundation on Linux has no CryptoKit): the
/// fingerprint that tells "the same request" for idempotency keys, and the digest the
/// integration harness compares bodies by (streamed, so 64 MiB bodies are never held). Its
/// tests check it against the FIPS 180-4 examples and against coreutils' `sha256sum`.
///
/// Written for debug builds (tests run at -Onone): raw pointers, wrapping operators and no
/// generic shifts, because each of those is a real function call when nothing is inlined.
/// That keeps it near 100 MB/s instead of 10.
package struct SHA256: Sendable {
    private static let roundConstants: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    private var hash: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]
    private var schedule = [UInt32](repeating: 0, count: 64)
    private var pending: [UInt8] = []
    private var totalLength: UInt64 = 0

    /// A fresh hash state.
    package init() {}

    /// The lowercase hex digest of `bytes`.
    package static func hex(of bytes: [UInt8]) -> String {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalizeHex()
    }

    /// Feeds more message bytes.
    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Feeds more message bytes straight from a buffer, so socket reads need no copy.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        totalLength &+= UInt64(bytes.count)
        var offset = 0
        if !pending.isEmpty {
            let take = min(64 - pending.count, bytes.count)
            pending.append(contentsOf: UnsafeRawBufferPointer(start: base, count: take))
            offset = take
            guard pending.count == 64 else { return }
            let block = pending
            block.withUnsafeBytes { compress($0.baseAddress.unsafelyUnwrapped) }
            pending.removeAll(keepingCapacity: true)
        }
        while bytes.count - offset >= 64 {
            compress(base + offset)
            offset &+= 64
        }
        if offset < bytes.count {
            pending.append(contentsOf: UnsafeRawBufferPointer(start: base + offset, count: bytes.count - offset))
        }
    }

    /// Pads, finishes and returns the 32-byte digest.
    package mutating func finalize() -> [UInt8] {
        let bitLength = totalLength &* 8
        let used = (pending.count + 1) % 64
        var tail: [UInt8] = [0x80] + [UInt8](repeating: 0, count: used <= 56 ? 56 - used : 120 - used)
        for shift in stride(from: 56, through: 0, by: -8) {
            tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift)))
        }
        update(tail)
        return hash.flatMap { word in
            [UInt8(truncatingIfNeeded: word >> 24), UInt8(truncatingIfNeeded: word >> 16),
             UInt8(truncatingIfNeeded: word >> 8), UInt8(truncatingIfNeeded: word)]
        }
    }

    /// Pads, finishes and returns the digest as lowercase hex.
    package mutating func finalizeHex() -> String {
        let digits = Array("0123456789abcdef")
        return String(finalize().flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0f)]] })
    }

    private mutating func compress(_ block: UnsafeRawPointer) {
        var state = hash
        Self.roundConstants.withUnsafeBufferPointer { constantsBuffer in
            schedule.withUnsafeMutableBufferPointer { scheduleBuffer in
                let k = constantsBuffer.baseAddress.unsafelyUnwrapped
                let w = scheduleBuffer.baseAddress.unsafelyUnwrapped
                for index in 0..<16 {
                    w[index] = block.loadUnaligned(fromByteOffset: index &* 4, as: UInt32.self).bigEndian
                }
                var index = 16
                while index < 64 {
                    let w15 = w[index &- 15]
                    let w2 = w[index &- 2]
                    let s0 = ((w15 &>> 7) | (w15 &<< 25)) ^ ((w15 &>> 18) | (w15 &<< 14)) ^ (w15 &>> 3)
                    let s1 = ((w2 &>> 17) | (w2 &<< 15)) ^ ((w2 &>> 19) | (w2 &<< 13)) ^ (w2 &>> 10)
                    w[index] = w[index &- 16] &+ s0 &+ w[index &- 7] &+ s1
                    index &+= 1
                }
                var a = state[0], b = state[1], c = state[2], d = state[3]
                var e = state[4], f = state[5], g = state[6], h = state[7]
                index = 0
                while index < 64 {
                    let s1 = ((e &>> 6) | (e &<< 26)) ^ ((e &>> 11) | (e &<< 21)) ^ ((e &>> 25) | (e &<< 7))
                    let choice = (e & f) ^ (~e & g)
                    let temp1 = h &+ s1 &+ choice &+ k[index] &+ w[index]
                    let s0 = ((a &>> 2) | (a &<< 30)) ^ ((a &>> 13) | (a &<< 19)) ^ ((a &>> 22) | (a &<< 10))
                    let majority = (a & b) ^ (a & c) ^ (b & c)
                    h = g
                    g = f
                    f = e
                    e = d &+ temp1
                    d = c
                    c = b
                    b = a
                    a = temp1 &+ s0 &+ majority
                    index &+= 1
                }
                state[0] &+= a
                state[1] &+= b
                state[2] &+= c
                state[3] &+= d
                state[4] &+= e
                state[5] &+= f
                state[6] &+= g
                state[7] &+= h
            }
        }
        hash = state
    }
}

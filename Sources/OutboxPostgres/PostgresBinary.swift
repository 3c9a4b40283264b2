import CLibPQ

/// Values of PostgreSQL's binary result format as the text the same value has in the text
/// format, for the types Outbox reads in binary (`PostgresConnection.pipeline(_:binary:)`), so
/// a result reads the same whichever format it came in. Integers are big-endian, a `uuid` its
/// 16 bytes, a `jsonb` a version byte (1) and then its text, `text` its UTF-8 bytes.
enum PostgresBinary {
    static let bool: Oid = 16, bytea: Oid = 17, int8: Oid = 20, int2: Oid = 21, int4: Oid = 23, text: Oid = 25
    static let varchar: Oid = 1043, uuid: Oid = 2950, jsonb: Oid = 3802

    /// The text form of `bytes`, a value of type `type` in binary format; nil for a type not
    /// listed above, or a value of the wrong size for its type.
    static func text(_ bytes: UnsafeBufferPointer<UInt8>, type: Oid) -> String? {
        switch type {
        case text, varchar: return String(decoding: bytes, as: UTF8.self)
        case jsonb:
            guard bytes.first == 1 else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes.dropFirst()), as: UTF8.self)
        case bool:
            guard bytes.count == 1 else { return nil }
            return bytes[0] == 0 ? "f" : "t"
        case int2: return integer(bytes, size: 2).map { String(Int16(truncatingIfNeeded: $0)) }
        case int4: return integer(bytes, size: 4).map { String(Int32(truncatingIfNeeded: $0)) }
        case int8: return integer(bytes, size: 8).map { String(Int64(bitPattern: $0)) }
        case uuid:
            guard bytes.count == 16 else { return nil }
            let digits = Array("0123456789abcdef".utf8)
            var out: [UInt8] = []
            out.reserveCapacity(36)
            for (index, byte) in bytes.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { out.append(UInt8(ascii: "-")) }
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 0x0f)])
            }
            return String(decoding: out, as: UTF8.self)
        default: return nil
        }
    }

    /// A big-endian integer of `size` bytes, its bits in the low end of the answer.
    private static func integer(_ bytes: UnsafeBufferPointer<UInt8>, size: Int) -> UInt64? {
        guard bytes.count == size else { return nil }
        return bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }
}

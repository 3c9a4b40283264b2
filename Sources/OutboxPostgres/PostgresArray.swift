import Foundation

/// A one-dimensional array in PostgreSQL's binary wire format (`array_send`/`array_recv`), sent
/// as a `$n::type[]` parameter with `PostgresValue.bytes`. It lets one prepared statement carry
/// any number of rows (`INSERT … SELECT … FROM unnest($1::uuid[], …)`): the server parses and
/// plans it once per connection instead of once per batch, and decodes each value from its
/// bytes instead of from text, while Outbox copies bodies as they are instead of formatting them.
///
/// The layout: dimensions (1), a has-nulls flag, the element type's OID, the length and lower
/// bound (1) of the one dimension, then each element as a 4-byte length (−1 for NULL) and its
/// bytes in the type's binary form. Every integer is big-endian.
struct PostgresArray {
    /// The element types Outbox sends, by the OID `pg_type` gives them (fixed since 8.x/9.4).
    enum Element: UInt32 {
        case bytea = 17
        case int8 = 20
        case int2 = 21
        case int4 = 23
        case text = 25
        case uuid = 2950
        case jsonb = 3802
    }

    private(set) var bytes: [UInt8]
    private(set) var count: Int32 = 0
    private var hasNull = false

    init(of element: Element, capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(20 + capacity)
        append32(1)
        append32(0)  // the has-nulls flag, set by `finish`
        append32(Int32(bitPattern: element.rawValue))
        append32(0)  // the length, set by `finish`
        append32(1)
    }

    /// The finished array as a parameter (its bytes shared, not copied).
    mutating func finish() -> PostgresValue {
        Self.put(hasNull ? 1 : 0, into: &bytes, at: 4)
        Self.put(count, into: &bytes, at: 12)
        return .bytes(bytes)
    }

    mutating func appendNull() {
        append32(-1)
        hasNull = true
        count += 1
    }

    mutating func append<Bytes: Collection<UInt8>>(bytes element: Bytes) {
        append32(Int32(element.count))
        bytes.append(contentsOf: element)
        count += 1
    }

    mutating func append(text: String) {
        var text = text
        text.withUTF8 { append(bytes: $0) }
    }

    mutating func append(text: String?) {
        if let text { append(text: text) } else { appendNull() }
    }

    /// `jsonb`'s binary form (a version byte, 1, then the JSON text), its text written by `write`
    /// straight into the array.
    mutating func append(jsonbWrittenBy write: (inout [UInt8]) -> Void) {
        let start = bytes.count
        append32(0)  // the length, set below
        bytes.append(1)
        write(&bytes)
        Self.put(Int32(bytes.count - start - 4), into: &bytes, at: start)
        count += 1
    }

    mutating func append(uuid: UUID?) {
        guard let uuid else { return appendNull() }
        withUnsafeBytes(of: uuid.uuid) { append(bytes: $0) }
    }

    mutating func append(int8 value: Int64) {
        append32(8)
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
        count += 1
    }

    mutating func append(int8 value: Int64?) {
        if let value { append(int8: value) } else { appendNull() }
    }

    mutating func append(int4 value: Int32) {
        append32(4)
        append32(value)
        count += 1
    }

    mutating func append(int2 value: Int16) {
        append32(2)
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
        count += 1
    }

    private mutating func append32(_ value: Int32) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    private static func put(_ value: Int32, into bytes: inout [UInt8], at offset: Int) {
        withUnsafeBytes(of: value.bigEndian) { raw in
            for index in 0..<4 { bytes[offset + index] = raw[index] }
        }
    }
}

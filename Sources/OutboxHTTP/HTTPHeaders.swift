/// Ordered multi-value header list; names compared ASCII-case-insensitively; duplicates kept in
/// order. Stored as bytes: one `[UInt8]` holding every field as `Name: value\r\n`, plus a table
/// of offsets, so parsing copies each field once and `write(into:)` is a single append; Strings
/// are only made by the accessors. Values decode as UTF-8 in accessors (obs-text bytes that
/// are not UTF-8 show as U+FFFD there) but are written back byte for byte.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    /// One field's place in `storage`: the name at `start`, then ": ", the value, CRLF.
    package struct Field: Sendable {
        var start: Int
        package var nameLength: Int
        package var valueLength: Int

        package var nameRange: Range<Int> { start..<(start + nameLength) }
        package var valueRange: Range<Int> {
            let valueStart = start + nameLength + 2
            return valueStart..<(valueStart + valueLength)
        }
        /// One past the CRLF that ends the field.
        var end: Int { start + nameLength + valueLength + 4 }
    }

    /// Every field as `Name: value\r\n`, in order, with no gaps (removal compacts).
    package private(set) var storage: [UInt8] = []
    package private(set) var fields: [Field] = []

    /// An empty list.
    public init() {}

    /// A list holding `fields` in the given order.
    public init(_ fields: [(name: String, value: String)]) {
        for field in fields { add(field.name, field.value) }
    }

    /// A list holding the literal's fields in order, e.g. `[("Host", "a"), ("Accept", "*/*")]`.
    public init(arrayLiteral elements: (name: String, value: String)...) {
        self.init(elements)
    }

    /// A list holding the literal's fields in order, e.g. `["Host": "a"]`; repeated keys stay
    /// repeated fields.
    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { add(name, value) }
    }

    /// The number of fields, duplicates included.
    public var count: Int { fields.count }

    /// True when there are no fields.
    public var isEmpty: Bool { fields.isEmpty }

    /// The field at `index` (0 ..< count), name with its original case.
    public subscript(index: Int) -> (name: String, value: String) {
        let field = fields[index]
        return storage.withUnsafeBufferPointer { bytes in
            (String(decoding: UnsafeBufferPointer(rebasing: bytes[field.nameRange]), as: UTF8.self),
             String(decoding: UnsafeBufferPointer(rebasing: bytes[field.valueRange]), as: UTF8.self))
        }
    }

    /// Appends a field at the end. The caller passes a valid name and value; CR, LF and NUL are
    /// replaced by SP anyway so that no caller mistake can split a message (RFC 9110 §5.5).
    public mutating func add(_ name: String, _ value: String) {
        var name = name
        var value = value
        name.withUTF8 { nameBytes in
            value.withUTF8 { valueBytes in appendSanitized(name: nameBytes, value: valueBytes) }
        }
    }

    /// Appends `name: value` with a constant name: how the proxy writes the fields it adds
    /// (`Via`, `X-Forwarded-*`, framing) straight from bytes, with no String made or scanned
    /// per request. CR, LF and NUL in `value` are replaced by SP, as in ``add(_:_:)``.
    package mutating func add(field name: StaticString, value: UnsafeBufferPointer<UInt8>) {
        appendSanitized(name: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), value: value)
    }

    /// Appends `name: value`, both constants (`Transfer-Encoding: chunked`).
    package mutating func add(field name: StaticString, value: StaticString) {
        add(field: name, value: UnsafeBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount))
    }

    /// Appends `name: value` with a constant name and a value held as a String (a peer's
    /// address, an origin's authority).
    package mutating func add(field name: StaticString, value: String) {
        var value = value
        value.withUTF8 { add(field: name, value: $0) }
    }

    /// Removes every field named `name`, then appends one field `name: value` at the end.
    public mutating func replaceOrAdd(_ name: String, _ value: String) {
        removeAll(name)
        add(name, value)
    }

    /// Removes every field, keeping the storage, so a list reused for head after head
    /// allocates only while it grows.
    package mutating func removeAll(keepingCapacity: Bool) {
        storage.removeAll(keepingCapacity: keepingCapacity)
        fields.removeAll(keepingCapacity: keepingCapacity)
    }

    /// Bytes the storage holds without growing.
    package var byteCapacity: Int { storage.capacity }

    /// Removes every field named `name` (case-insensitive).
    public mutating func removeAll(_ name: String) {
        var name = name
        name.withUTF8 { nameBytes in
            removeFields { bytes, field in
                HTTPByte.equalsIgnoringCase(UnsafeBufferPointer(rebasing: bytes[field.nameRange]), nameBytes)
            }
        }
    }

    /// Removes every field whose lowercased name is in the set (used for hop-by-hop removal).
    public mutating func removeAll(lowercasedNames: Set<String>) {
        guard !lowercasedNames.isEmpty, !fields.isEmpty else { return }
        // Copy the names once into one scratch buffer (on the stack when small) and compare
        // bytes: hashing a new String per field would cost more than the whole removal.
        var total = 0
        for name in lowercasedNames { total += name.utf8.count }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Swift.max(total, 1)) { names in
            withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: lowercasedNames.count) { spans in
                var offset = 0
                var spanCount = 0
                for var name in lowercasedNames {
                    name.withUTF8 { bytes in
                        for byte in bytes {
                            names[offset] = byte
                            offset += 1
                        }
                        spans[spanCount] = (offset - bytes.count)..<offset
                    }
                    spanCount += 1
                }
                let nameBytes = UnsafeBufferPointer(names)
                removeFields { bytes, field in
                    let fieldName = UnsafeBufferPointer(rebasing: bytes[field.nameRange])
                    for span in spans[0..<spanCount] where span.count == fieldName.count {
                        // Folding both sides also forgives a set entry that is not lowercased.
                        if HTTPByte.equalsIgnoringCase(fieldName, UnsafeBufferPointer(rebasing: nameBytes[span])) { return true }
                    }
                    return false
                }
            }
        }
    }

    /// Appends "Name: value\r\n" for every field, byte for byte as stored.
    public func write(into buffer: inout [UInt8]) {
        buffer.append(contentsOf: storage)
    }

    /// Bytes `write(into:)` appends.
    package var byteCount: Int { storage.count }

    /// Appends a field parsed from the wire that is already `name: value` (one SP after the
    /// colon, no OWS after the value), the common case, with one copy.
    mutating func appendValidated(canonicalLine line: UnsafeBufferPointer<UInt8>, nameLength: Int) {
        let start = storage.count
        storage.append(contentsOf: line)
        storage.append(HTTPByte.cr)
        storage.append(HTTPByte.lf)
        fields.append(Field(start: start, nameLength: nameLength, valueLength: line.count - nameLength - 2))
    }

    /// A list of `count` fields that were validated when they were first received (the log
    /// reads them back), taking `byteCount` bytes as `Name: value\r\n` lines: one allocation
    /// for the lines and one for the table, each field copied once. `fill` adds the fields
    /// with ``Builder/add(name:value:)``, exactly `count` of that total size, and returns
    /// false when it cannot (the init then returns nil).
    package init?(validatedCount count: Int, byteCount: Int, _ fill: (inout Builder) -> Bool) {
        var builder = Builder(count: count)
        var filled = false
        storage = [UInt8](unsafeUninitializedCapacity: byteCount) { lines, initialized in
            builder.lines = UnsafeMutableRawBufferPointer(lines)
            filled = fill(&builder)
            initialized = builder.end
        }
        guard filled else { return nil }
        precondition(builder.fields.count == count && builder.end == byteCount, "fewer header bytes than measured")
        fields = builder.fields
    }

    /// Writes the fields of ``init(validatedCount:byteCount:_:)`` into place.
    package struct Builder {
        var lines = UnsafeMutableRawBufferPointer(start: nil, count: 0)
        var fields: [Field] = []
        var end = 0

        init(count: Int) {
            fields.reserveCapacity(count)
        }

        /// Appends `name: value\r\n`.
        package mutating func add(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
            precondition(fields.count < fields.capacity && end + name.count + value.count + 4 <= lines.count,
                         "more header bytes than measured")
            fields.append(Field(start: end, nameLength: name.count, valueLength: value.count))
            let base = lines.baseAddress!
            if let source = name.baseAddress { (base + end).copyMemory(from: source, byteCount: name.count) }
            end += name.count
            lines.storeBytes(of: HTTPByte.colon, toByteOffset: end, as: UInt8.self)
            lines.storeBytes(of: HTTPByte.space, toByteOffset: end + 1, as: UInt8.self)
            end += 2
            if let source = value.baseAddress { (base + end).copyMemory(from: source, byteCount: value.count) }
            end += value.count
            lines.storeBytes(of: HTTPByte.cr, toByteOffset: end, as: UInt8.self)
            lines.storeBytes(of: HTTPByte.lf, toByteOffset: end + 1, as: UInt8.self)
            end += 2
        }
    }

    /// Appends a field parsed from the wire; the bytes were validated by the parser.
    package mutating func appendValidated(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        let start = storage.count
        storage.append(contentsOf: name)
        storage.append(HTTPByte.colon)
        storage.append(HTTPByte.space)
        storage.append(contentsOf: value)
        storage.append(HTTPByte.cr)
        storage.append(HTTPByte.lf)
        fields.append(Field(start: start, nameLength: name.count, valueLength: value.count))
    }

    /// Reserves room for a head of about `bytes` bytes, so that parsing one head allocates once.
    package mutating func reserveCapacity(bytes: Int) {
        storage.reserveCapacity(bytes)
        fields.reserveCapacity(16)
    }

    /// Appends `name: value\r\n` with CR, LF and NUL turned into SP. A clean field (nearly
    /// every one: the check runs eight bytes at a time) goes in as one copy of a line built on
    /// the stack, so the storage is grown and checked once per field, not once per piece.
    private mutating func appendSanitized(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        let start = storage.count
        let length = name.count + value.count + 4
        let clean = HTTPByte.isValidFieldValue(name) && HTTPByte.isValidFieldValue(value)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length) { line in
            var index = line.initialize(fromContentsOf: name)
            line[index] = HTTPByte.colon
            line[index + 1] = HTTPByte.space
            index = line[(index + 2)...].initialize(fromContentsOf: value)
            line[index] = HTTPByte.cr
            line[index + 1] = HTTPByte.lf
            if !clean {
                for position in 0..<(length - 2) {
                    let byte = line[position]
                    if byte == HTTPByte.cr || byte == HTTPByte.lf || byte == 0 { line[position] = HTTPByte.space }
                }
            }
            storage.append(contentsOf: UnsafeBufferPointer(line))
        }
        fields.append(Field(start: start, nameLength: name.count, valueLength: value.count))
    }

    /// Drops the fields for which `shouldRemove` is true, compacting the storage in place
    /// (no allocation when the storage is not shared).
    private mutating func removeFields(_ shouldRemove: (UnsafeBufferPointer<UInt8>, Field) -> Bool) {
        // Find the first match read-only, so a list with nothing to remove is never copied.
        let firstMatch = storage.withUnsafeBufferPointer { bytes in
            fields.firstIndex { shouldRemove(bytes, $0) }
        }
        guard let firstMatch else { return }
        var kept = fields
        fields = []
        var keptCount = firstMatch
        var write = kept[firstMatch].start
        storage.withUnsafeMutableBufferPointer { bytes in
            guard let base = bytes.baseAddress else { return }
            for index in (firstMatch + 1)..<kept.count {
                var field = kept[index]
                if shouldRemove(UnsafeBufferPointer(bytes), field) { continue }
                let length = field.end - field.start
                // Regions may overlap: copyMemory has memmove semantics.
                UnsafeMutableRawPointer(base + write).copyMemory(from: base + field.start, byteCount: length)
                field.start = write
                kept[keptCount] = field
                keptCount += 1
                write += length
            }
        }
        storage.removeLast(storage.count - write)
        kept.removeLast(kept.count - keptCount)
        fields = kept
    }
}

extension HTTPHeaders: Equatable {
    /// Same fields in the same order, names compared case-insensitively, values exactly.
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        guard lhs.fields.count == rhs.fields.count else { return false }
        return lhs.storage.withUnsafeBufferPointer { left in
            rhs.storage.withUnsafeBufferPointer { right in
                for (a, b) in zip(lhs.fields, rhs.fields) {
                    guard HTTPByte.equalsIgnoringCase(UnsafeBufferPointer(rebasing: left[a.nameRange]),
                                                      UnsafeBufferPointer(rebasing: right[b.nameRange])),
                          left[a.valueRange].elementsEqual(right[b.valueRange])
                    else { return false }
                }
                return true
            }
        }
    }
}

extension HTTPHeaders {
    /// Iterates the fields in order as `(name, value)` Strings.
    public struct Iterator: IteratorProtocol {
        private let headers: HTTPHeaders
        private var index = 0

        init(_ headers: HTTPHeaders) { self.headers = headers }

        /// The next field, or nil after the last one.
        public mutating func next() -> (name: String, value: String)? {
            guard index < headers.count else { return nil }
            defer { index += 1 }
            return headers[index]
        }
    }

    /// An iterator over the fields in order.
    public func makeIterator() -> Iterator { Iterator(self) }
}

extension HTTPHeaders: CustomStringConvertible {
    /// The fields as `Name: value` lines, for logs and test failures.
    public var description: String {
        map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }
}

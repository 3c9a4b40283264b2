/// Lookups by name. Names compare ASCII-case-insensitively (RFC 9110 §5.1); the comparisons run
/// on the stored bytes, and a String is made only for what is returned.
extension HTTPHeaders {
    /// The value of the first field named `name`, or nil.
    public func first(_ name: String) -> String? {
        var result: String?
        forEachValue(named: name) { value in
            result = String(decoding: value, as: UTF8.self)
            return false
        }
        return result
    }

    /// The bytes of the first field named `name`, or nil.
    package func firstBytes(_ name: String) -> [UInt8]? {
        var result: [UInt8]?
        forEachValue(named: name) { value in
            result = Array(value)
            return false
        }
        return result
    }

    /// True when the first field named `name` holds exactly `expected` (nil: there is none),
    /// compared on the stored bytes.
    package func first(_ name: String, is expected: [UInt8]?) -> Bool {
        var found: UnsafeBufferPointer<UInt8>?
        var equal = false
        forEachValue(named: name) { value in
            found = value
            if let expected { equal = expected.withUnsafeBufferPointer { $0.elementsEqual(value) } }
            return false
        }
        return found == nil ? expected == nil : equal
    }

    /// Every value of fields named `name`, in order; a comma list stays one value.
    public func values(_ name: String) -> [String] {
        var result: [String] = []
        forEachValue(named: name) { value in
            result.append(String(decoding: value, as: UTF8.self))
            return true
        }
        return result
    }

    /// True when at least one field is named `name`.
    public func contains(_ name: String) -> Bool {
        count(of: name) > 0
    }

    /// How many fields are named `name`.
    public func count(of name: String) -> Int {
        var result = 0
        forEachValue(named: name) { _ in
            result += 1
            return true
        }
        return result
    }

    /// Comma-separated list tokens (RFC 9110 §5.6.1) of all fields named `name`, OWS trimmed,
    /// lowercased, empty elements dropped.
    public func tokens(_ name: String) -> [String] {
        var result: [String] = []
        forEachValue(named: name) { value in
            HTTPByte.forEachListElement(value) { element in
                result.append(String(decoding: element.lazy.map(HTTPByte.lowercased), as: UTF8.self))
            }
            return true
        }
        return result
    }

    /// True when a list element of a field named `name` equals `token`, case-insensitively
    /// (e.g. `containsToken("close", in: "Connection")`).
    public func containsToken(_ token: String, in name: String) -> Bool {
        var token = token
        var name = name
        return token.withUTF8 { tokenBytes in
            name.withUTF8 { nameBytes in containsToken(tokenBytes, in: nameBytes) }
        }
    }

    /// Byte form of `containsToken(_:in:)`: whether a field named `name` lists `token` (both
    /// compared case-insensitively), e.g. whether `Connection` names a field as hop-by-hop.
    package func containsToken(_ token: UnsafeBufferPointer<UInt8>, in name: UnsafeBufferPointer<UInt8>) -> Bool {
        containsToken(in: name) { HTTPByte.equalsIgnoringCase($0, token) }
    }

    /// Whether a list element of a field named `name` satisfies `matches`; stops at the first.
    package func containsToken(in name: UnsafeBufferPointer<UInt8>,
                               where matches: (UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
        var found = false
        forEachValue(named: name) { value in
            HTTPByte.forEachListElement(value) { element in
                if !found && matches(element) { found = true }
            }
            return !found
        }
        return found
    }

    /// Whether a field's name begins with `prefix` (given in lowercase; names match in any
    /// case): one pass that lets a head with no `Outbox-*` field skip their parsing.
    package func containsName(withLowercasedPrefix prefix: StaticString) -> Bool {
        let wanted = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        return storage.withUnsafeBufferPointer { bytes in
            fields.contains { field in
                field.nameLength >= wanted.count && HTTPByte.equalsIgnoringCase(
                    UnsafeBufferPointer(rebasing: bytes[field.start..<(field.start + wanted.count)]), wanted)
            }
        }
    }

    /// Calls `body` with the value bytes of each field named `name`, in order, while it
    /// returns true. The bytes are valid only inside `body`.
    func forEachValue(named name: String, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        var name = name
        name.withUTF8 { nameBytes in
            forEachValue(named: nameBytes, body)
        }
    }

    /// Byte-name form of `forEachValue(named:_:)`, for the parser's framing checks.
    func forEachValue(named name: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        storage.withUnsafeBufferPointer { bytes in
            for field in fields where field.nameLength == name.count {
                guard HTTPByte.equalsIgnoringCase(UnsafeBufferPointer(rebasing: bytes[field.nameRange]), name) else { continue }
                if !body(UnsafeBufferPointer(rebasing: bytes[field.valueRange])) { return }
            }
        }
    }
}

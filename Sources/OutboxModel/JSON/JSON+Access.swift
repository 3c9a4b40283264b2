/// Reading a document someone else wrote (an admin answer, a request body) without a decoder
/// per shape: each accessor is nil when the value is not of that kind.
extension JSON {
    /// The member named `key` of an object; nil for a missing key or a non-object.
    package subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    package var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// An integer, or a number without fraction that fits.
    package var intValue: Int? {
        switch self {
        case .int(let value): return value
        case .double(let value): return value.rounded() == value ? Int(exactly: value) : nil
        default: return nil
        }
    }

    /// Any number.
    package var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    package var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    package var arrayValue: [JSON]? {
        if case .array(let items) = self { return items }
        return nil
    }
}

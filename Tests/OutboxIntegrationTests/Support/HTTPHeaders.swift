/// One header line as it appeared on the wire (name case preserved, value with surrounding
/// whitespace trimmed).
struct HeaderField: Sendable, Hashable, CustomStringConvertible {
    let name: String
    let value: String

    /// A field with the given name and value.
    init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    var description: String { "\(name): \(value)" }
}

/// An ordered header list with case-insensitive lookup; duplicates stay separate fields, as
/// the proxy must keep them.
struct HTTPHeaders: Sendable, Equatable, CustomStringConvertible {
    var fields: [HeaderField]

    /// A list holding `fields` in order.
    init(_ fields: [HeaderField] = []) {
        self.fields = fields
    }

    /// The first value of the field named `name`, compared case-insensitively.
    subscript(_ name: String) -> String? {
        fields.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// Every value of the fields named `name`, in order.
    func values(_ name: String) -> [String] {
        fields.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }

    /// Whether any field is named `name`.
    func contains(_ name: String) -> Bool {
        self[name] != nil
    }

    /// The comma-separated tokens of every `name` field, lowercased (for `Connection`,
    /// `Transfer-Encoding`).
    func tokens(_ name: String) -> [String] {
        values(name).flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: " \t").lowercased() }
            .filter { !$0.isEmpty }
    }

    /// The fields whose names are not in `excluded` (case-insensitive), in order.
    func removing(_ excluded: Set<String>) -> [HeaderField] {
        let lowered = Set(excluded.map { $0.lowercased() })
        return fields.filter { !lowered.contains($0.name.lowercased()) }
    }

    var description: String {
        fields.map(\.description).joined(separator: "\n")
    }
}

extension StringProtocol {
    /// The string without leading and trailing characters from `set`.
    func trimmingCharacters(in set: String) -> String {
        let characters = Set(set)
        var slice = Substring(self)
        while let first = slice.first, characters.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, characters.contains(last) { slice = slice.dropLast() }
        return String(slice)
    }
}

/// A JSON document, the one model for both directions: `JSONReader` reads config files and
/// admin request bodies into it, and the admin API, the proxy's `202` and `check-config` write
/// with it. Integers stay apart from other numbers (a config tells `1` from `1.5` from `true`)
/// and object members keep their order (a document reads back in the order it was written, and
/// every answer lists its fields the same way).
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    /// A number written without fraction or exponent that fits in `Int`.
    case int(Int)
    /// Any other number. Read ones are finite; a non-finite one is written as `null`.
    case double(Double)
    case string(String)
    case array([JSON])
    /// Members in order; the reader refuses a document that repeats a key.
    case object([(key: String, value: JSON)])

    /// Structural equality, members compared in order (`1` and `1.0` differ).
    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.int(let a), .int(let b)): a == b
        case (.double(let a), .double(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    /// `.string(value)`, or `.null` for nil.
    public static func string(_ value: String?) -> JSON { value.map { .string($0) } ?? .null }

    /// The JSON text. `pretty` indents by two spaces, one member or element per line, for people
    /// reading curl output; with `scalarArraysInline` as well, an array of scalars stays on one
    /// line (`["POST", "PUT"]`), the way `config.example.json` is written.
    public func rendered(pretty: Bool = false, scalarArraysInline: Bool = false) -> String {
        var out = ""
        write(into: &out, layout: pretty ? (scalarArraysInline ? .config : .pretty) : .compact, indent: "")
        return out
    }

    private enum Layout { case compact, pretty, config }

    private var isScalar: Bool {
        switch self {
        case .array, .object: false
        default: true
        }
    }

    private func write(into out: inout String, layout: Layout, indent: String) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .int(let value): out += String(value)
        case .double(let value): out += value.isFinite ? JSON.numberText(value) : "null"
        case .string(let value): out += JSON.quoted(value)
        case .array(let items):
            let oneLine = layout == .compact || (layout == .config && items.allSatisfy(\.isScalar))
            JSON.writeSequence(items, open: "[", close: "]", oneLine: oneLine, layout: layout, indent: indent, into: &out) { item, inner, out in
                item.write(into: &out, layout: layout, indent: inner)
            }
        case .object(let members):
            JSON.writeSequence(members, open: "{", close: "}", oneLine: layout == .compact, layout: layout, indent: indent,
                               into: &out) { member, inner, out in
                out += JSON.quoted(member.key) + (layout == .compact ? ":" : ": ")
                member.value.write(into: &out, layout: layout, indent: inner)
            }
        }
    }

    /// `open`, the elements, `close`: on one line (`,` between elements when compact, `, `
    /// otherwise) or one element per line, indented; an empty sequence is `[]` or `{}` either way.
    private static func writeSequence<Element>(_ elements: [Element], open: String, close: String, oneLine: Bool, layout: Layout,
                                               indent: String, into out: inout String,
                                               element write: (Element, String, inout String) -> Void) {
        let inner = indent + "  "
        out += open
        for (index, element) in elements.enumerated() {
            if index > 0 { out += oneLine && layout != .compact ? ", " : "," }
            if !oneLine { out += "\n" + inner }
            write(element, inner, &out)
        }
        if !oneLine, !elements.isEmpty { out += "\n" + indent }
        out += close
    }

    /// Encodes `text` as a JSON string literal with quotes (RFC 8259 §7): `"`, `\` and control
    /// characters escaped, everything else written as UTF-8. `alsoEscape` widens the set of
    /// scalars written as `\uXXXX` (the logger adds C1 controls and line separators).
    public static func quoted(_ text: String, alsoEscape: ((Unicode.Scalar) -> Bool)? = nil) -> String {
        guard let alsoEscape else {
            // On the UTF-8 bytes, copied in bulk where nothing needs escaping: scalar by scalar,
            // the admin view of a stored 4 MiB body took 170-220 ms (release) on the event
            // loop's thread, 27-32 ms this way.
            var out: [UInt8] = []
            out.reserveCapacity(text.utf8.count + 2)
            appendQuoted(text, to: &out)
            return String(decoding: out, as: UTF8.self)
        }
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || alsoEscape(scalar):
                out += "\\u" + hex4(scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// A number as JSON text: integral values of safe magnitude without ".0" (so `604800`
    /// prints as `config.example.json` writes it), others in Swift's shortest round-tripping form.
    public static func numberText(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 {
            return String(Int(value))
        }
        return value.description
    }

    static func hex4(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: false)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

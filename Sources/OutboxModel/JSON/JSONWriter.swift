/// A JSON value built by the admin API: ordered objects (fields come out in the order they
/// are added, so every answer reads the same way), rendered compact or pretty for curl users.
public indirect enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        lhs.rendered() == rhs.rendered()
    }

    public static func string(_ value: String?) -> JSON { value.map { .string($0) } ?? .null }
    public static func int(_ value: Int) -> JSON { .int(Int64(value)) }

    /// The JSON text; `pretty` indents by two spaces, one member per line.
    public func rendered(pretty: Bool = false) -> String {
        var out = ""
        write(into: &out, pretty: pretty, indent: "")
        return out
    }

    private func write(into out: inout String, pretty: Bool, indent: String) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .int(let value): out += String(value)
        case .double(let value):
            out += value.isFinite ? JSONValue.numberText(value) : "null"
        case .string(let value): JSON.quote(value, into: &out)
        case .array(let items):
            if items.isEmpty {
                out += "[]"
                return
            }
            let inner = indent + "  "
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                if pretty { out += "\n" + inner }
                item.write(into: &out, pretty: pretty, indent: inner)
            }
            if pretty { out += "\n" + indent }
            out += "]"
        case .object(let members):
            if members.isEmpty {
                out += "{}"
                return
            }
            let inner = indent + "  "
            out += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { out += "," }
                if pretty { out += "\n" + inner }
                JSON.quote(key, into: &out)
                out += pretty ? ": " : ":"
                value.write(into: &out, pretty: pretty, indent: inner)
            }
            if pretty { out += "\n" + indent }
            out += "}"
        }
    }

    /// RFC 8259 string escaping, shared with the config printer.
    static func quote(_ text: String, into out: inout String) {
        out += JSONValue.quoted(text)
    }
}

/// A JSON document as `JSONReader` returns it: integers and other numbers kept apart (the
/// config needs `1` vs `1.5` vs `true`), object members in document order.
package enum JSONValue: Sendable, Equatable {
    /// One `"key": value` pair of an object, in the order it was written.
    package struct Member: Sendable, Equatable {
        package var key: String
        package var value: JSONValue
    }

    case null
    case bool(Bool)
    /// A number written without fraction or exponent that fits in `Int`.
    case integer(Int)
    /// Any other (finite) number.
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([Member])

    /// Encodes `text` as a JSON string literal with quotes (RFC 8259 §7): `"`, `\` and control
    /// characters escaped, everything else written as UTF-8. `alsoEscape` widens the set of
    /// scalars written as `\uXXXX` (the logger adds C1 controls and line separators).
    package static func quoted(_ text: String, alsoEscape: (Unicode.Scalar) -> Bool = { _ in false }) -> String {
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
    package static func numberText(_ value: Double) -> String {
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

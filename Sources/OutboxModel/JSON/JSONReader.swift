/// A strict RFC 8259 reader into `JSON`, for config documents and admin request bodies.
/// Stricter than `JSONSerialization` where a config needs it: duplicate keys are errors,
/// integers stay distinct from `true` and from `1.5`, numbers that overflow are errors, and
/// errors carry a line and column (and the key path, for a member's value that is no number it takes).
package struct JSONReader {
    /// Why the bytes are not a JSON document, and where (1-based line and byte column).
    package struct SyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
        package var line: Int
        package var column: Int
        package var reason: String
        /// The member whose value is no number this reader takes, as a key path
        /// (`retry.maxRetries`, `queue.ports[1]`): a value that is not JSON where a value belongs
        /// (`NaN`, `Infinity`), a number too large to read (`99999999999999999999`), or a number
        /// followed by what no number has (`0x10`, `1_000`). nil for every other error and at
        /// the top level. Lets a config error name the key and an admin `400` the field.
        package var path: String?

        package var description: String { "line \(line), column \(column): \(reason)" }
    }

    /// Deeper nesting than any config needs; bounds the recursion on hostile input.
    static let maxDepth = 64

    private let bytes: [UInt8]
    private var index = 0

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Reads exactly one JSON value (an optional UTF-8 BOM and surrounding whitespace allowed).
    package static func parse(_ bytes: [UInt8]) throws(SyntaxError) -> JSON {
        var reader = JSONReader(bytes: bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { reader.index = 3 }
        let value = try reader.readValue(path: "", depth: 0)
        reader.skipWhitespace()
        guard reader.index == bytes.count else {
            throw reader.error("unexpected \(reader.describeCurrent()) after the document")
        }
        return value
    }

    private mutating func readValue(path: String, depth: Int) throws(SyntaxError) -> JSON {
        skipWhitespace()
        guard index < bytes.count else { throw error("unexpected end of input, expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            return try readObject(path: path, depth: depth + 1)
        case UInt8(ascii: "["):
            return try readArray(path: path, depth: depth + 1)
        case UInt8(ascii: "\""):
            return .string(try readString())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            do throws(SyntaxError) {
                return try readNumber()
            } catch {
                throw error.at(path)
            }
        case UInt8(ascii: "t"):
            try readLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try readLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try readLiteral("null")
            return .null
        default:
            // `NaN`, `Infinity`, `+1`, `.5`: no JSON value, but where the member's value belongs.
            throw error("unexpected \(describeCurrent()), expected a value").at(path)
        }
    }

    private mutating func readObject(path: String, depth: Int) throws(SyntaxError) -> JSON {
        guard depth <= Self.maxDepth else { throw error("nesting deeper than \(Self.maxDepth) levels") }
        index += 1
        var members: [(key: String, value: JSON)] = []
        var seen: Set<String> = []
        skipWhitespace()
        if consume(UInt8(ascii: "}")) { return .object(members) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw error("unexpected \(describeCurrent()), expected a string key")
            }
            let keyStart = index
            let key = try readString()
            let memberPath = path.isEmpty ? key : "\(path).\(key)"
            guard seen.insert(key).inserted else {
                index = keyStart
                throw error("duplicate key \(JSON.quoted(memberPath))")
            }
            skipWhitespace()
            guard consume(UInt8(ascii: ":")) else {
                throw error("unexpected \(describeCurrent()), expected ':' after key")
            }
            let value = try readValue(path: memberPath, depth: depth)
            members.append((key: key, value: value))
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return .object(members) }
            guard consume(UInt8(ascii: ",")) else {
                throw missingSeparator("',' or '}'", after: value, at: memberPath)
            }
        }
    }

    private mutating func readArray(path: String, depth: Int) throws(SyntaxError) -> JSON {
        guard depth <= Self.maxDepth else { throw error("nesting deeper than \(Self.maxDepth) levels") }
        index += 1
        var elements: [JSON] = []
        skipWhitespace()
        if consume(UInt8(ascii: "]")) { return .array(elements) }
        while true {
            let elementPath = "\(path)[\(elements.count)]"
            let element = try readValue(path: elementPath, depth: depth)
            elements.append(element)
            skipWhitespace()
            if consume(UInt8(ascii: "]")) { return .array(elements) }
            guard consume(UInt8(ascii: ",")) else {
                throw missingSeparator("',' or ']'", after: element, at: elementPath)
            }
        }
    }

    private mutating func readString() throws(SyntaxError) -> String {
        let start = index
        index += 1
        var utf8: [UInt8] = []
        while true {
            guard index < bytes.count else {
                index = start
                throw error("unterminated string")
            }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: utf8, as: UTF8.self) else {
                    index = start
                    throw error("invalid UTF-8 in string")
                }
                return text
            case UInt8(ascii: "\\"):
                try readEscape(into: &utf8)
            case 0..<0x20:
                throw error("control character in string (write it as an escape)")
            default:
                utf8.append(byte)
                index += 1
            }
        }
    }

    private mutating func readEscape(into utf8: inout [UInt8]) throws(SyntaxError) {
        guard index + 1 < bytes.count else { throw error("unterminated string") }
        let escape = bytes[index + 1]
        let simple: UInt8? = switch escape {
        case UInt8(ascii: "\""): UInt8(ascii: "\"")
        case UInt8(ascii: "\\"): UInt8(ascii: "\\")
        case UInt8(ascii: "/"): UInt8(ascii: "/")
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "r"): 0x0D
        case UInt8(ascii: "t"): 0x09
        default: nil
        }
        if let simple {
            utf8.append(simple)
            index += 2
            return
        }
        guard escape == UInt8(ascii: "u") else { throw error("invalid escape in string") }
        var value = try readHex4(at: index + 2)
        index += 6
        if (0xD800...0xDBFF).contains(value) {
            // A high surrogate is only half a character: RFC 8259 §7 pairs it with a low one.
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else { throw error("unpaired surrogate in \\u escape") }
            let low = try readHex4(at: index + 2)
            guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate in \\u escape") }
            value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
            index += 6
        }
        guard let scalar = Unicode.Scalar(value) else { throw error("unpaired surrogate in \\u escape") }
        utf8.append(contentsOf: Array(String(scalar).utf8))
    }

    private func readHex4(at position: Int) throws(SyntaxError) -> UInt32 {
        guard position + 4 <= bytes.count else { throw error("invalid \\u escape") }
        var value: UInt32 = 0
        for byte in bytes[position..<position + 4] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    private mutating func readNumber() throws(SyntaxError) -> JSON {
        let start = index
        var isInteger = true
        _ = consume(UInt8(ascii: "-"))
        // RFC 8259 §6: int = zero / ( digit1-9 *DIGIT ), so "01" is not a number.
        if consume(UInt8(ascii: "0")) {
            if index < bytes.count, isDigit(bytes[index]) {
                index = start
                throw error("leading zero in number")
            }
        } else if !consumeDigits() {
            throw error("invalid number")
        }
        if consume(UInt8(ascii: ".")) {
            isInteger = false
            guard consumeDigits() else { throw error("expected digits after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if !consume(UInt8(ascii: "+")) { _ = consume(UInt8(ascii: "-")) }
            guard consumeDigits() else { throw error("expected digits in exponent") }
        }
        // The grammar above is a subset of CheckedNumber's decimal syntax, so only the range
        // can fail here.
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        do throws(NumberError) {
            if isInteger { return .int(try CheckedNumber.integer(text, in: Int.min...Int.max)) }
            return .double(try CheckedNumber.number(text, in: -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude))
        } catch {
            index = start
            throw self.error("\(isInteger ? "integer" : "number") \(NumberError.shortened(text)) out of range")
        }
    }

    /// The error for a separator missing after `value`. When the value was a number and more
    /// follows, that is taken for the rest of it (`0x10` reads as `0`, then `x`): the member is
    /// named. A document that merely ends there is not the number's fault.
    private func missingSeparator(_ expected: String, after value: JSON, at path: String) -> SyntaxError {
        let error = error("unexpected \(describeCurrent()), expected \(expected)")
        let isNumber = switch value {
        case .int, .double: true
        default: false
        }
        return isNumber && index < bytes.count ? error.at(path) : error
    }

    /// Consumes one or more digits; false when there is none.
    private mutating func consumeDigits() -> Bool {
        let start = index
        while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        return index > start
    }

    private mutating func readLiteral(_ word: String) throws(SyntaxError) {
        let expected = Array(word.utf8)
        guard bytes[index...].starts(with: expected) else {
            throw error("unexpected \(describeCurrent()), expected a value")
        }
        index += expected.count
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func consume(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private func describeCurrent() -> String {
        guard index < bytes.count else { return "end of input" }
        let byte = bytes[index]
        if byte > 0x20, byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(String(byte, radix: 16, uppercase: true))"
    }

    /// An error at the current position; the line and column are counted only now, on failure.
    private func error(_ reason: String) -> SyntaxError {
        var line = 1
        var lineStart = 0
        for position in 0..<min(index, bytes.count) where bytes[position] == 0x0A {
            line += 1
            lineStart = position + 1
        }
        return SyntaxError(line: line, column: index - lineStart + 1, reason: reason)
    }
}

extension JSONReader.SyntaxError {
    /// This error attributed to the member at `path` (none at the top level, where it is "").
    fileprivate func at(_ path: String) -> Self {
        var error = self
        if !path.isEmpty { error.path = path }
        return error
    }
}

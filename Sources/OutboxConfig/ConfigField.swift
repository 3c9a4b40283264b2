import OutboxModel

/// One value of a config document together with its dotted key path, so every check can name
/// the key it rejects (`queue.methods[1]: expected string`). Type mismatches read
/// `expected <type>`; range and syntax mismatches add what was found (`got 0`, `got "x"`).
struct ConfigField {
    /// The largest `…Seconds` value (`CheckedNumber.maxSeconds`, about 31 years).
    static let maxSeconds = CheckedNumber.maxSeconds

    let path: String
    let value: JSON

    /// An error naming this key: `path: text`.
    func error(_ text: String) -> ConfigError {
        ConfigError(path.isEmpty ? text : "\(path): \(text)")
    }

    /// An error for a value of the right type but the wrong content, quoting what was found.
    func invalid(_ expectation: String) -> ConfigError {
        error("expected \(expectation), got \(found)")
    }

    /// The value as written, for `got …` in messages (strings quoted and escaped).
    var found: String {
        switch value {
        case .null: "null"
        case .bool(let flag): String(flag)
        case .int(let number): String(number)
        case .double(let number): JSON.numberText(number)
        case .string(let text): JSON.quoted(text)
        case .array: "an array"
        case .object: "an object"
        }
    }

    func integer() throws(ConfigError) -> Int {
        guard case .int(let number) = value else { throw error("expected integer") }
        return number
    }

    /// Any JSON number; integers are exact in a `Double` up to 2^53, beyond what configs use.
    func number() throws(ConfigError) -> Double {
        switch value {
        case .int(let number): return Double(number)
        case .double(let number): return number
        default: throw error("expected number")
        }
    }

    func bool() throws(ConfigError) -> Bool {
        guard case .bool(let flag) = value else { throw error("expected boolean") }
        return flag
    }

    func string() throws(ConfigError) -> String {
        guard case .string(let text) = value else { throw error("expected string") }
        return text
    }

    /// A string, or nil for JSON `null`.
    func optionalString() throws(ConfigError) -> String? {
        switch value {
        case .null: return nil
        case .string(let text): return text
        default: throw error("expected string or null")
        }
    }

    /// The elements, each with its path `path[i]`.
    func array() throws(ConfigError) -> [ConfigField] {
        guard case .array(let elements) = value else { throw error("expected array") }
        return elements.enumerated().map { ConfigField(path: "\(path)[\($0.offset)]", value: $0.element) }
    }

    /// The members in document order, each with its path `path.key`.
    func members() throws(ConfigError) -> [(key: String, field: ConfigField)] {
        guard case .object(let members) = value else { throw error("expected object") }
        return members.map { member in
            (member.key, ConfigField(path: path.isEmpty ? member.key : "\(path).\(member.key)", value: member.value))
        }
    }

    /// The error for a member that no config has.
    func unknownKey() -> ConfigError {
        ConfigError("\(path): unknown key")
    }

    // MARK: Range-checked values

    // The type is checked first (`1.5` and `"5"` read `expected integer`), then the value goes
    // through `CheckedNumber`, the one checked conversion every number from outside takes;
    // `expectation` words the range in this file's style (`integer >= 1`, `port 1-65535`).

    func integer(atLeast minimum: Int) throws(ConfigError) -> Int {
        try integer(in: minimum...Int.max, "integer >= \(minimum)")
    }

    func integer(in range: ClosedRange<Int>, _ expectation: String) throws(ConfigError) -> Int {
        _ = try integer()
        do {
            return try CheckedNumber.integer(value, in: range)
        } catch {
            throw invalid(expectation)
        }
    }

    func number(in range: ClosedRange<Double>, _ expectation: String) throws(ConfigError) -> Double {
        _ = try number()
        do {
            return try CheckedNumber.number(value, in: range)
        } catch {
            throw invalid(expectation)
        }
    }

    /// A duration in seconds: finite, 0...maxSeconds, fractions allowed (`0.2`).
    func seconds() throws(ConfigError) -> Double {
        try number(in: 0...Self.maxSeconds, "seconds between 0 and \(JSON.numberText(Self.maxSeconds))")
    }

    func port() throws(ConfigError) -> Int {
        try integer(in: 1...65535, "port 1-65535")
    }

    func statuses() throws(ConfigError) -> [Int] {
        var statuses: [Int] = []
        for element in try array() {
            statuses.append(try element.integer(in: 100...599, "status 100-599"))
        }
        return statuses
    }

    /// An RFC 9110 §5.6.2 token, as used for methods and header names.
    func token(_ what: String) throws(ConfigError) -> String {
        let text = try string()
        guard Self.isToken(text) else { throw invalid(what) }
        return text
    }

    func enumeration<Choice: RawRepresentable & CaseIterable>(_: Choice.Type) throws(ConfigError) -> Choice
    where Choice.RawValue == String {
        let text = try string()
        guard let choice = Choice(rawValue: text) else {
            throw invalid("one of \(Choice.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return choice
    }

    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            default:
                "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }
}

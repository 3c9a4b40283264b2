/// The one way a number from outside becomes an `Int` or a `Double` that code computes with: a
/// query parameter, a flag, a member of an admin request's JSON body, a config key, or a field
/// an upstream sent. The result is finite, inside the range the caller names, and integral where
/// an integer is asked for; anything else is a `NumberError` that the boundary turns into its
/// own error naming the parameter, key or flag (`400`, a config error, a usage error).
///
/// Swift's own conversions are not fit for that: `Int64(1e300)` and `Int(Double.nan)` trap (one
/// `POST /admin/prune?olderThanSeconds=1e300` killed the process), and `Double("0x10")`,
/// `Double("nan")` and `Double("inf")` accept what no user of a decimal parameter means. Text is
/// therefore read as plain decimal only: an optional `-`, digits, an optional fraction and
/// exponent (`1.5`, `.5`, `2e3`); integers as digits only. No `+`, hex, `_`, spaces, `nan` or
/// `inf`. A decimal whose magnitude underflows (`1e-400`) is 0; one that overflows a `Double`
/// (`1e400`) is out of range; `-0` is 0.
package enum CheckedNumber {
    /// The longest duration a `…Seconds` value may name where nothing tighter applies (config
    /// keys, `olderThanSeconds`): about 31 years, far beyond any useful timeout, and small enough
    /// that it fits in an `Int64` of nanoseconds.
    package static let maxSeconds: Double = 1_000_000_000

    // MARK: Text (query parameters, flags, header fields)

    /// `text` as an integer in `range`: `-`? digits, nothing else.
    package static func integer(_ text: some StringProtocol, in range: ClosedRange<Int>) throws(NumberError) -> Int {
        let expected = describe(range)
        guard isDecimalInteger(text.utf8) else { throw NumberError(.notANumber, expected: expected, text: text) }
        // The text is digits only, so a nil here means the value does not fit in an Int.
        guard let value = Int(text) else { throw NumberError(.outOfRange, expected: expected, text: text) }
        guard range.contains(value) else { throw NumberError(.outOfRange, expected: expected, text: text) }
        return value
    }

    /// `text` as a finite decimal number in `range` (fractions and exponents allowed).
    package static func number(_ text: some StringProtocol, in range: ClosedRange<Double>,
                               unit: String? = nil) throws(NumberError) -> Double {
        let expected = describe(range, unit: unit)
        guard isDecimal(text.utf8), let value = Double(String(text)) else {
            throw NumberError(.notANumber, expected: expected, text: text)
        }
        // Decimal text never reads as NaN; a non-finite value is one too large for a Double.
        guard value.isFinite, range.contains(value) else { throw NumberError(.outOfRange, expected: expected, text: text) }
        return value + 0  // -0 becomes 0
    }

    /// `text` as a number of seconds from 0 to `maximum`.
    package static func seconds(_ text: some StringProtocol, atMost maximum: Double = maxSeconds) throws(NumberError) -> Double {
        try number(text, in: 0...maximum, unit: "seconds")
    }

    // MARK: JSON values (admin request bodies, config documents)

    /// `value` as an integer in `range`: a JSON integer, or a number without fraction (`2.0`,
    /// `1e3`) that fits; every other kind of value is refused.
    package static func integer(_ value: JSON, in range: ClosedRange<Int>) throws(NumberError) -> Int {
        let expected = describe(range)
        switch value {
        case .int(let number):
            guard range.contains(number) else { throw NumberError(.outOfRange, expected: expected, json: value) }
            return number
        case .double(let number):
            guard number.isFinite else { throw NumberError(.notFinite, expected: expected, json: value) }
            guard number.rounded(.towardZero) == number else { throw NumberError(.notAnInteger, expected: expected, json: value) }
            // Int(exactly:) is nil past Int's range (it never traps, unlike Int(_:)).
            guard let integer = Int(exactly: number), range.contains(integer) else {
                throw NumberError(.outOfRange, expected: expected, json: value)
            }
            return integer
        default:
            throw NumberError(.notANumber, expected: expected, json: value)
        }
    }

    /// `value` as a finite number in `range`.
    package static func number(_ value: JSON, in range: ClosedRange<Double>, unit: String? = nil) throws(NumberError) -> Double {
        let expected = describe(range, unit: unit)
        let number: Double
        switch value {
        case .int(let integer): number = Double(integer)
        case .double(let double): number = double
        default: throw NumberError(.notANumber, expected: expected, json: value)
        }
        guard number.isFinite else { throw NumberError(.notFinite, expected: expected, json: value) }
        guard range.contains(number) else { throw NumberError(.outOfRange, expected: expected, json: value) }
        return number + 0  // -0 becomes 0
    }

    /// `value` as a number of seconds from 0 to `maximum`.
    package static func seconds(_ value: JSON, atMost maximum: Double = maxSeconds) throws(NumberError) -> Double {
        try number(value, in: 0...maximum, unit: "seconds")
    }

    // MARK: Syntax

    /// Whether `bytes` are a plain decimal number: `-`? then digits with an optional fraction
    /// (`1`, `1.5`, `.5`, `1.`), then an optional exponent (`e3`, `E-2`).
    package static func isDecimal(_ bytes: some Collection<UInt8>) -> Bool {
        var index = bytes.startIndex
        func digits() -> Int {
            var count = 0
            while index != bytes.endIndex, isDigit(bytes[index]) {
                count += 1
                index = bytes.index(after: index)
            }
            return count
        }
        func consume(_ byte: UInt8) -> Bool {
            guard index != bytes.endIndex, bytes[index] == byte else { return false }
            index = bytes.index(after: index)
            return true
        }
        _ = consume(UInt8(ascii: "-"))
        var mantissa = digits()
        if consume(UInt8(ascii: ".")) { mantissa += digits() }
        guard mantissa > 0 else { return false }
        if consume(UInt8(ascii: "e")) || consume(UInt8(ascii: "E")) {
            if !consume(UInt8(ascii: "+")) { _ = consume(UInt8(ascii: "-")) }
            guard digits() > 0 else { return false }
        }
        return index == bytes.endIndex
    }

    /// Whether `bytes` are `-`? then one or more digits.
    package static func isDecimalInteger(_ bytes: some Collection<UInt8>) -> Bool {
        let digits = bytes.first == UInt8(ascii: "-") ? bytes.dropFirst() : bytes[...]
        return !digits.isEmpty && digits.allSatisfy(isDigit)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// `an integer from 1 to 1000`, `an integer >= 0` when there is no upper bound to speak of.
    package static func describe(_ range: ClosedRange<Int>) -> String {
        switch (range.lowerBound, range.upperBound) {
        case (.min, .max): "an integer"
        case (let low, .max): "an integer >= \(low)"
        case (let low, let high): "an integer from \(low) to \(high)"
        }
    }

    /// `a number from 0 to 1`, `a number of seconds from 0 to 3600`.
    package static func describe(_ range: ClosedRange<Double>, unit: String? = nil) -> String {
        let noun = unit.map { "a number of \($0)" } ?? "a number"
        guard range.lowerBound > -.greatestFiniteMagnitude || range.upperBound < .greatestFiniteMagnitude else { return noun }
        return "\(noun) from \(JSON.numberText(range.lowerBound)) to \(JSON.numberText(range.upperBound))"
    }
}

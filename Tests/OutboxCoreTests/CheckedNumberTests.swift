@testable import OutboxModel
import Testing

/// `CheckedNumber`, the one conversion every number from outside goes through: a table of
/// inputs and the value or the problem each gives, for text (query parameters, flags) and for
/// JSON values (admin bodies, config).
@Suite("Checked numbers: finite, in range, integral where needed")
struct CheckedNumberTests {
    /// One input and what it must give: a value, or the problem that refuses it.
    struct Case<Value: Sendable & Equatable>: Sendable, CustomTestStringConvertible {
        var input: String
        var outcome: Outcome<Value>
        var testDescription: String { "\(input.prefix(30)) → \(outcome)" }
    }

    enum Outcome<Value: Sendable & Equatable>: Sendable, Equatable {
        case value(Value)
        case refused(NumberError.Problem)
    }

    static func ok<V: Sendable & Equatable>(_ input: String, _ value: V) -> Case<V> { Case(input: input, outcome: .value(value)) }
    static func refused<V: Sendable & Equatable>(_ input: String, _ problem: NumberError.Problem) -> Case<V> { Case(input: input, outcome: .refused(problem)) }

    static let longDigits = String(repeating: "9", count: 5000)

    @Test("text as an integer from 1 to 1000", arguments: [
        ok("1", 1), ok("1000", 1000), ok("007", 7),
        refused("0", .outOfRange), refused("-0", .outOfRange), refused("-1", .outOfRange), refused("1001", .outOfRange),
        refused("99999999999999999999", .outOfRange), refused("-99999999999999999999", .outOfRange),
        refused(longDigits, .outOfRange),
        refused("", .notANumber), refused("-", .notANumber), refused("+5", .notANumber), refused(" 5", .notANumber),
        refused("5 ", .notANumber), refused("0x10", .notANumber), refused("1_000", .notANumber), refused("1e2", .notANumber),
        refused("1.5", .notANumber), refused("10.0", .notANumber), refused("NaN", .notANumber), refused("inf", .notANumber),
        refused("true", .notANumber), refused("١٢", .notANumber),
    ] as [Case<Int>])
    func textIntegers(_ entry: Case<Int>) {
        #expect(Self.outcome { () throws(NumberError) in try CheckedNumber.integer(entry.input, in: 1...1000) } == entry.outcome)
    }

    @Test("text as seconds from 0 to 3600", arguments: [
        ok("0", 0.0), ok("-0", 0.0), ok("1.5", 1.5), ok(".5", 0.5), ok("5.", 5.0), ok("1e2", 100.0), ok("1E+2", 100.0),
        ok("3600", 3600.0), ok("1e-400", 0.0), ok("4.9e-324", Double.leastNonzeroMagnitude), ok("0000.250", 0.25),
        refused("-1", .outOfRange), refused("3600.001", .outOfRange), refused("1e300", .outOfRange), refused("-1e300", .outOfRange),
        refused("1e400", .outOfRange), refused("99999999999999999999", .outOfRange), refused(longDigits, .outOfRange),
        refused("", .notANumber), refused(".", .notANumber), refused("-.", .notANumber), refused("1e", .notANumber),
        refused("e5", .notANumber), refused("1.2.3", .notANumber), refused("NaN", .notANumber), refused("nan", .notANumber),
        refused("inf", .notANumber), refused("-inf", .notANumber), refused("Infinity", .notANumber),
        refused("0x10", .notANumber), refused("0x1p4", .notANumber), refused("1_000", .notANumber), refused("+1", .notANumber),
        refused(" 1", .notANumber), refused("1,5", .notANumber), refused("true", .notANumber), refused("ten", .notANumber),
    ] as [Case<Double>])
    func textSeconds(_ entry: Case<Double>) {
        let outcome = Self.outcome { () throws(NumberError) in try CheckedNumber.seconds(entry.input, atMost: 3600) }
        #expect(outcome == entry.outcome)
        // -0 comes back as +0: a value that prints as "-0" would surprise.
        if case .value(let value) = outcome { #expect(value.sign == .plus || value != 0) }
    }

    @Test("JSON values as an integer >= 1", arguments: [
        ok("1", 1), ok("2.0", 2), ok("1e3", 1000), ok("9223372036854775807", Int.max),
        refused("0", .outOfRange), refused("-1", .outOfRange), refused("1e300", .outOfRange), refused("-1e300", .outOfRange),
        refused("1.5", .notAnInteger), refused("1e-400", .outOfRange),
        refused(#""5""#, .notANumber), refused("true", .notANumber), refused("null", .notANumber),
        refused("[]", .notANumber), refused("{}", .notANumber), refused(#""""#, .notANumber),
    ] as [Case<Int>])
    func jsonIntegers(_ entry: Case<Int>) throws {
        let value = try JSONReader.parse(Array(entry.input.utf8))
        #expect(Self.outcome { () throws(NumberError) in try CheckedNumber.integer(value, in: 1...Int.max) } == entry.outcome)
    }

    @Test("JSON values as a number from 0 to 1", arguments: [
        ok("0", 0.0), ok("-0", 0.0), ok("-0.0", 0.0), ok("1", 1.0), ok("0.25", 0.25), ok("1e-400", 0.0),
        refused("-1", .outOfRange), refused("1.0000001", .outOfRange), refused("1e300", .outOfRange), refused("-1e300", .outOfRange),
        refused("99999999999999999999", .outOfRange),
        refused(#""0.5""#, .notANumber), refused("false", .notANumber), refused("null", .notANumber),
    ] as [Case<Double>])
    func jsonNumbers(_ entry: Case<Double>) throws {
        // 99999999999999999999 is no JSON value this reader takes (it names it instead);
        // built in code, it is a Double past every range.
        let value = entry.input == "99999999999999999999" ? JSON.double(1e20) : try JSONReader.parse(Array(entry.input.utf8))
        #expect(Self.outcome { () throws(NumberError) in try CheckedNumber.number(value, in: 0...1) } == entry.outcome)
    }

    @Test("non-finite JSON values built in code are refused, never converted")
    func nonFiniteJSON() {
        for value in [Double.nan, .infinity, -.infinity, .signalingNaN] {
            #expect(Self.outcome { () throws(NumberError) in try CheckedNumber.number(.double(value), in: -1e308...1e308) }
                    == .refused(.notFinite))
            #expect(Self.outcome { () throws(NumberError) in try CheckedNumber.integer(.double(value), in: .min ... .max) }
                    == .refused(.notFinite))
        }
    }

    @Test("the error says what was wanted and quotes what was found, cut short")
    func messages() throws {
        #expect(throws: NumberError(.outOfRange, expected: "a number of seconds from 0 to 1000000000", text: "1e300")) {
            try CheckedNumber.seconds("1e300")
        }
        #expect(throws: NumberError(.notANumber, expected: "an integer from 1 to 1000", text: "0x10")) {
            try CheckedNumber.integer("0x10", in: 1...1000)
        }
        do {
            _ = try CheckedNumber.integer(Self.longDigits, in: 1...1000)
            Issue.record("5000 digits accepted")
        } catch {
            #expect(error.description == "expected an integer from 1 to 1000, got " + String(repeating: "9", count: 40) + "…")
        }
        #expect(CheckedNumber.describe(0...Int.max) == "an integer >= 0")
        #expect(CheckedNumber.describe(Int.min...Int.max) == "an integer")
        #expect(CheckedNumber.describe(0...86_400.0) == "a number from 0 to 86400")
        #expect(NumberError(.notANumber, expected: "x", json: .string(String(repeating: "a", count: 100))).found
                == "\"" + String(repeating: "a", count: 40) + "…\"")
        #expect(NumberError(.notFinite, expected: "x", json: .double(.infinity)).found == "inf")
    }

    @Test("the JSON reader names the member whose value is no number it can read", arguments: [
        (#"{"a": {"times": 99999999999999999999}}"#, "a.times", "integer 99999999999999999999 out of range"),
        (#"{"forSeconds": 1e999}"#, "forSeconds", "number 1e999 out of range"),
        (#"{"times": NaN}"#, "times", "unexpected 'N', expected a value"),
        (#"{"times": -Infinity}"#, "times", "invalid number"),
        (#"{"times": 0x10}"#, "times", "unexpected 'x', expected ',' or '}'"),
        (#"{"times": 1_000}"#, "times", "unexpected '_', expected ',' or '}'"),
        (#"{"ports": [443, 1e999]}"#, "ports[1]", "number 1e999 out of range"),
    ])
    func readerNamesTheMember(json: String, path: String, reason: String) {
        do {
            _ = try JSONReader.parse(Array(json.utf8))
            Issue.record("accepted \(json)")
        } catch {
            #expect(error.path == path)
            #expect(error.reason == reason)
        }
    }

    @Test("only a number problem names its member; other syntax errors and the top level name none", arguments: [
        ("NaN", nil), ("{} x", nil), (#"{"a":1"#, nil), ("[NaN]", "[0]"), (#"{"a" 1}"#, nil), (#"{"a": "x" "b"}"#, nil),
        (#"{"a": [1 2]}"#, "a[0]"), (#"{"a": {"b": 1,}}"#, nil), (#"{"a": "\x"}"#, nil),
    ] as [(String, String?)])
    func readerPaths(json: String, path: String?) {
        do {
            _ = try JSONReader.parse(Array(json.utf8))
            Issue.record("accepted \(json)")
        } catch {
            #expect(error.path == path, "\(json): \(error)")
        }
    }

    static func outcome<V: Sendable & Equatable>(_ body: () throws(NumberError) -> V) -> Outcome<V> {
        do {
            return .value(try body())
        } catch {
            return .refused(error.problem)
        }
    }
}

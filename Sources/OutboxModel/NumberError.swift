/// Why a value is not the number a parameter takes, from `CheckedNumber`: what was wanted and
/// what was found, ready for the boundary to put after the parameter's name
/// (`olderThanSeconds: expected a number of seconds from 0 to 1000000000, got "1e300"`).
package struct NumberError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong with the value.
    package enum Problem: Sendable, Equatable {
        /// Not a number at all: other text, a string, a boolean, null, an array or an object.
        case notANumber
        /// A NaN or an infinity (from a JSON value built in code; text never reads as one).
        case notFinite
        /// A number with a fraction where an integer is needed.
        case notAnInteger
        /// A number outside the range, including one too large for an `Int` or a `Double`.
        case outOfRange
    }

    /// Longest piece of the offending value quoted in a message: a 1 MB parameter must not
    /// make a 1 MB error line.
    static let maxFoundLength = 40

    package var problem: Problem
    /// The range in words: `an integer from 1 to 1000`.
    package var expected: String
    /// The value as written (text) or as JSON (a string quoted), cut to `maxFoundLength`
    /// characters with "…".
    package var found: String

    init(_ problem: Problem, expected: String, text: some StringProtocol) {
        self.problem = problem
        self.expected = expected
        found = Self.shortened(String(text))
    }

    init(_ problem: Problem, expected: String, json: JSON) {
        self.problem = problem
        self.expected = expected
        found = switch json {
        case .string(let text): JSON.quoted(Self.shortened(text))
        case .array: "an array"
        case .object: "an object"
        case .double(let number): JSON.numberText(number)
        default: Self.shortened(json.rendered())
        }
    }

    /// `expected …, got …`.
    package var description: String { "expected \(expected), got \(found)" }

    /// `text` cut to `maxFoundLength` characters, "…" marking the cut.
    package static func shortened(_ text: String) -> String {
        text.count <= maxFoundLength ? text : text.prefix(maxFoundLength) + "…"
    }
}

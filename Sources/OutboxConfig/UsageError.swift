/// Usage errors → exit 2. message is one line naming the offending flag/value.
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The one-line explanation, e.g. `unknown flag --bogus`, without a trailing newline.
    public var message: String

    /// Wraps an already formatted message.
    public init(_ message: String) {
        self.message = message
    }

    /// The message, so `"\(error)"` prints it unchanged.
    public var description: String { message }
}

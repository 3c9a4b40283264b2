/// A configuration that cannot be used: invalid JSON, an unknown key, a value of the wrong type
/// or out of range, an unreadable file, or a bad flag value. `message` is one line meant for a
/// terminal, naming the file, key path or flag at fault (`queue.maxBodyBytes: expected integer`);
/// the executable prints it and exits with status 2.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The one-line explanation, without a trailing newline.
    public var message: String

    /// Wraps an already formatted message.
    public init(_ message: String) {
        self.message = message
    }

    /// The message, so `"\(error)"` prints it unchanged.
    public var description: String { message }
}

/// An HTTP protocol version `HTTP/major.minor` (RFC 9110 §2.5). The codec speaks 1.0 and 1.1.
public struct HTTPVersion: Sendable, Equatable, Hashable {
    /// The major version digit.
    public var major: Int
    /// The minor version digit.
    public var minor: Int

    /// The version `HTTP/major.minor`.
    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    /// `HTTP/1.0`.
    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    /// `HTTP/1.1`.
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)
}

extension HTTPVersion: CustomStringConvertible {
    /// The version as written on the wire, e.g. `HTTP/1.1`.
    public var description: String { "HTTP/\(major).\(minor)" }
}

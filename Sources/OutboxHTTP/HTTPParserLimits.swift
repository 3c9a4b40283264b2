/// Size limits a parser enforces while reading; exceeding them is an error, never a buffer grown
/// without bound.
public struct HTTPParserLimits: Sendable, Equatable {
    /// Largest head (start line, fields, blank line, and blank lines before the start line);
    /// also bounds a trailer section and a chunk-size line with its extensions.
    public var maxHeaderBytes: Int
    /// Largest body in bytes; nil means unlimited.
    public var maxBodyBytes: Int?

    /// Limits with the config's default head size (64 KiB) and no body limit.
    public init(maxHeaderBytes: Int = 65536, maxBodyBytes: Int? = nil) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
    }
}

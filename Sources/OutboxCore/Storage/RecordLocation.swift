/// Where a record lives: for reading an operation's full request/response back from disk.
/// `offset` is the first byte of the record's frame in segment `segment`; `length` counts the
/// whole frame (header included).
public struct RecordLocation: Sendable, Equatable, Hashable {
    public var segment: UInt32
    public var offset: UInt64
    public var length: UInt32

    /// A location as stored in an index.
    public init(segment: UInt32, offset: UInt64, length: UInt32) {
        self.segment = segment
        self.offset = offset
        self.length = length
    }
}

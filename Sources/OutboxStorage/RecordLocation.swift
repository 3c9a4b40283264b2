/// Where a record lives: for reading an operation's full request/response back from disk.
/// `offset` is the first byte of the record's frame in segment `segment`; `length` counts the
/// whole frame (header included). `generation` counts the compactions that rewrote the
/// segment, so a location from before a compaction is refused instead of read at the wrong
/// place (it fits in the padding after `segment`: the struct stays 24 bytes).
public struct RecordLocation: Sendable, Equatable, Hashable {
    public var segment: UInt32
    public var generation: UInt32
    public var offset: UInt64
    public var length: UInt32

    /// A location as stored in an index.
    public init(segment: UInt32, generation: UInt32 = 0, offset: UInt64, length: UInt32) {
        self.segment = segment
        self.generation = generation
        self.offset = offset
        self.length = length
    }
}

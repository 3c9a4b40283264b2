/// A segment's file name: `00000001.log` for the first generation of segment 1, and
/// `00000001.2.log` after its second compaction. Names sort by segment number; recovery keeps
/// the highest generation of each number and deletes the older ones (a crash between a
/// compaction's rename and its delete leaves both).
struct SegmentName: Hashable, Comparable {
    var segment: UInt32
    var generation: UInt32

    var fileName: String {
        let digits = String(segment)
        let padded = String(repeating: "0", count: max(0, 8 - digits.count)) + digits
        return generation == 0 ? padded + ".log" : padded + "." + String(generation) + ".log"
    }

    /// Parses a file name written by `fileName`; nil for anything else.
    init?(fileName: String) {
        let parts = fileName.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3, parts.last == "log", parts[0].count == 8,
              parts[0].allSatisfy({ $0.isASCII && $0.isNumber }), let segment = UInt32(parts[0]) else { return nil }
        var generation: UInt32 = 0
        if parts.count == 3 {
            guard parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), let parsed = UInt32(parts[1]), parsed > 0 else { return nil }
            generation = parsed
        }
        self.segment = segment
        self.generation = generation
    }

    init(segment: UInt32, generation: UInt32) {
        self.segment = segment
        self.generation = generation
    }

    static func < (lhs: SegmentName, rhs: SegmentName) -> Bool {
        (lhs.segment, lhs.generation) < (rhs.segment, rhs.generation)
    }
}

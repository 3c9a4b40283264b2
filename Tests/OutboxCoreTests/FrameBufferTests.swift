@testable import OutboxStorage
import Testing

/// The log's buffer of frames: it grows past its first capacity without losing what it holds,
/// and taking a prefix (a batch capped by `maxBatchRecords`) leaves the rest in order.
@Suite("Storage: the buffer of frames")
struct FrameBufferTests {
    private static func fill(_ buffer: FrameBuffer, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { source in
            let region = buffer.extend(by: source.count)
            region.copyMemory(from: source)
        }
    }

    @Test("appends past the capacity keep every byte, in order")
    func growsWithoutLosingBytes() {
        let buffer = FrameBuffer(capacity: 64)
        var expected: [UInt8] = []
        for round in 0..<40 {
            let piece = (0..<(round * 37 + 5)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ round) }
            if round.isMultiple(of: 2) {
                Self.fill(buffer, piece)
            } else {
                piece.withUnsafeBytes { buffer.append($0) }
            }
            expected += piece
            #expect(Array(buffer.bytes) == expected, "after round \(round)")
        }
        #expect(buffer.count == expected.count)
    }

    @Test("removing a prefix keeps the rest; emptying keeps working for the next appends")
    func removesAPrefixAndEmpties() {
        let buffer = FrameBuffer(capacity: 64)
        let bytes = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        Self.fill(buffer, bytes)
        buffer.removeFirst(120)
        #expect(Array(buffer.bytes) == Array(bytes[120...]))
        buffer.removeFirst(buffer.count)
        #expect(buffer.count == 0)
        Self.fill(buffer, [1, 2, 3])
        buffer.removeAll()
        #expect(buffer.count == 0 && buffer.bytes.isEmpty)
        Self.fill(buffer, [9, 8])
        #expect(Array(buffer.bytes) == [9, 8])
    }
}

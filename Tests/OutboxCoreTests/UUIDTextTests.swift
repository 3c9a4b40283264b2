import Foundation
@testable import OutboxModel
import Testing

@Suite("UUID text")
struct UUIDTextTests {
    @Test func lowercaseTextMatchesFoundation_AndParsesBack() {
        for _ in 0..<200 {
            let uuid = UUID()
            let text = UUIDText.lowercase(uuid)
            #expect(text == uuid.uuidString.lowercased())
            #expect(UUIDText.parse(text)?.0 == uuid)
            #expect(UUIDText.parse(uuid.uuidString)?.0 == uuid)
        }
    }

    @Test func everyByteValue_AtEveryPosition_IsWrittenAsFoundationWritesIt() {
        for value in 0...255 {
            for position in 0..<16 {
                var bytes = [UInt8](repeating: UInt8(255 - value), count: 16)
                bytes[position] = UInt8(value)
                let uuid = bytes.withUnsafeBytes { UUID(uuid: $0.load(as: uuid_t.self)) }
                #expect(UUIDText.lowercase(uuid) == uuid.uuidString.lowercased(), "byte \(value) at \(position)")
            }
        }
    }

    @Test func letterCaseIsReported_AndNonCanonicalTextIsRefused() {
        #expect(UUIDText.parse("0f8e4c1a-0000-4000-8000-00000000abcd")?.1 == .lower)
        #expect(UUIDText.parse("0F8E4C1A-0000-4000-8000-00000000ABCD")?.1 == .upper)
        #expect(UUIDText.parse("01234567-0000-4000-8000-000000000000")?.1 == UUIDText.LetterCase.none)
        #expect(UUIDText.parse("0f8E4c1a-0000-4000-8000-00000000abcd")?.1 == .mixed)
        for bad in ["", "0f8e4c1a00004000800000000000abcd", "0f8e4c1a-0000-4000-8000-00000000abcg",
                    "0f8e4c1a-0000-4000-8000_00000000abcd", "{0f8e4c1a-0000-4000-8000-00000000abcd}"] {
            #expect(UUIDText.parse(bad) == nil, "\(bad)")
        }
    }

    @Test("generated UUIDs: version 7 with the RFC variant, the time first, canonical lowercase text, unique, every random bit varies")
    func generatedUUIDs() {
        let source = RandomUUIDs()
        var seen = Set<UUID>()
        var ones = [UInt8](repeating: 0, count: 16)
        var zeros = [UInt8](repeating: 0, count: 16)
        var previous = ""
        // Several refills of the 4 KiB buffer (256 UUIDs each), ten to a millisecond.
        for n in 0..<2_000 {
            let millis = Int64(0x0123_4567_89AB) + Int64(n / 10)
            let uuid = source.next(millis: { millis })
            let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 7, "version nibble of \(uuid)")
            #expect(bytes[8] >> 6 == 0b10, "variant bits of \(uuid)")
            #expect(bytes[0..<6].reduce(0) { $0 << 8 | Int64($1) } == millis, "time of \(uuid)")
            let text = UUIDText.lowercase(uuid)
            #expect(text == uuid.uuidString.lowercased())
            #expect(UUIDText.parse(text)?.0 == uuid)
            #expect(seen.insert(uuid).inserted, "\(uuid) came twice")
            // A later millisecond sorts after, as text (the database's order of a key) too.
            if n % 10 == 0 { #expect(text > previous, "\(text) after \(previous)") }
            previous = text
            for index in 6..<16 {
                ones[index] |= bytes[index]
                zeros[index] |= ~bytes[index]
            }
        }
        // Every bit after the time but the six fixed ones was seen as 0 and as 1: the bytes are
        // random, not a constant or a counter's low bits.
        ones[6] |= 0xF0
        zeros[6] |= 0xF0
        ones[8] |= 0xC0
        zeros[8] |= 0xC0
        #expect(ones[6...] == [UInt8](repeating: 0xFF, count: 10)[...])
        #expect(zeros[6...] == [UInt8](repeating: 0xFF, count: 10)[...])
        // The wall clock's time by default.
        let before = WallClock.millis()
        let now = withUnsafeBytes(of: source.next().uuid) { Array($0) }[0..<6].reduce(0) { $0 << 8 | Int64($1) }
        #expect((before...WallClock.millis()).contains(now))
    }

    @Test func everyNonHexCharacter_AtEveryDigitPosition_IsRefused_AndEveryHexOneRead() {
        let canonical = Array("0f8e4c1a-0000-4000-8000-00000000abcd".utf8)
        let hex = Set("0123456789abcdefABCDEF".utf8)
        for position in canonical.indices where canonical[position] != UInt8(ascii: "-") {
            for byte in UInt8(ascii: " ")...UInt8(ascii: "~") {
                var text = canonical
                text[position] = byte
                let parsed = UUIDText.parse(String(decoding: text, as: UTF8.self))
                if hex.contains(byte) {
                    #expect(parsed?.0 == UUID(uuidString: String(decoding: text, as: UTF8.self)), "\(position) \(byte)")
                } else {
                    #expect(parsed == nil, "byte \(byte) at \(position) accepted")
                }
            }
        }
    }
}

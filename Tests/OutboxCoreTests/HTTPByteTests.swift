@testable import OutboxHTTP
import Testing

@Suite("HTTP byte classes and line scanning")
struct HTTPByteTests {
    @Test func tokenCharMaskMatchesRFC9110() {
        let tchar = Set(Array("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8))
        for byte in UInt8.min...UInt8.max {
            #expect(HTTPByte.isTokenChar(byte) == tchar.contains(byte), "byte \(byte)")
        }
    }

    @Test func regNameMaskMatchesRFC3986() {
        let allowed = Set(Array("-._~!$&'()*+,;=0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8))
        for byte in UInt8.min...UInt8.max {
            #expect(HTTPByte.isRegNameChar(byte) == allowed.contains(byte), "byte \(byte)")
        }
    }

    @Test func wordLowercasingMatchesTheByteRuleInEveryLane() {
        var mismatches: [String] = []
        for byte in UInt8.min...UInt8.max {
            for lane in 0..<8 {
                // The other lanes hold bytes on either side of the letter ranges.
                let filler: UInt64 = 0x5B40_7A60_C15A_417F
                let shift = UInt64(lane * 8)
                let word = (filler & ~(0xFF << shift)) | (UInt64(byte) << shift)
                let lowered = HTTPByte.lowercasedWord(word)
                for other in 0..<8 {
                    let input = UInt8(truncatingIfNeeded: word >> UInt64(other * 8))
                    let output = UInt8(truncatingIfNeeded: lowered >> UInt64(other * 8))
                    if output != HTTPByte.lowercased(input) { mismatches.append("byte \(input) in lane \(other)") }
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    @Test func caseInsensitiveEqualityAgreesWithTheByteRuleForEveryPairAtEveryPosition() {
        var mismatches: [String] = []
        for length in [1, 7, 8, 9, 16, 19] {
            for position in Set([0, length / 2, length - 1]) {
                var a = Array("content-type-and-more".utf8.prefix(length))
                var b = Array("CONTENT-TYPE-AND-MORE".utf8.prefix(length))
                for x in UInt8.min...UInt8.max {
                    for y in UInt8.min...UInt8.max {
                        a[position] = x
                        b[position] = y
                        let equal = a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { HTTPByte.equalsIgnoringCase(a, $0) } }
                        if equal != (HTTPByte.lowercased(x) == HTTPByte.lowercased(y)) {
                            mismatches.append("\(x) vs \(y) at \(position) of \(length)")
                        }
                    }
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    @Test func fieldValueCheckFindsAForbiddenByteAtAnyPositionAndLength() {
        let forbidden: [UInt8] = [0x00, 0x01, 0x0A, 0x0D, 0x1F, 0x7F]
        let allowed: [UInt8] = [0x09, 0x20, 0x21, 0x7E, 0x80, 0xC3, 0xFF]
        for length in 1...24 {
            for position in 0..<length {
                for byte in forbidden + allowed {
                    var value = [UInt8](repeating: UInt8(ascii: "v"), count: length)
                    value[position] = byte
                    let valid = value.withUnsafeBufferPointer { HTTPByte.isValidFieldValue($0) }
                    #expect(valid == allowed.contains(byte), "byte \(byte) at \(position) of \(length)")
                }
            }
        }
        #expect([UInt8]().withUnsafeBufferPointer { HTTPByte.isValidFieldValue($0) })
    }

    @Test func aLineFedByteByByteIsScannedOnce() throws {
        var scanner = HTTPLineScanner()
        let line = Array("X-Long: abcdefghij\r\n".utf8)
        for end in 1..<(line.count - 1) {
            let found = try Array(line[0..<end]).withUnsafeBufferPointer {
                try scanner.nextLine(in: $0, from: 0, limit: 100, tooLong: .headerTooLarge)
            }
            #expect(found == nil)
            // A trailing CR is rescanned at most once more; everything before it is remembered.
            #expect(scanner.scanned == end, "after \(end) bytes")
        }
        let found = try line.withUnsafeBufferPointer {
            try scanner.nextLine(in: $0, from: 0, limit: 100, tooLong: .headerTooLarge)
        }
        #expect(found?.content == 0..<(line.count - 2) && found?.next == line.count)
        #expect(scanner.scanned == 0)
    }

    @Test func reasonPhrasesAreTheStandardOnes() {
        #expect(HTTPStatus.reasonPhrase(200) == "OK")
        #expect(HTTPStatus.reasonPhrase(202) == "Accepted")
        #expect(HTTPStatus.reasonPhrase(413) == "Content Too Large")
        #expect(HTTPStatus.reasonPhrase(502) == "Bad Gateway")
        #expect(HTTPStatus.reasonPhrase(799) == "")
        #expect(HTTPResponseHead(status: 507).reason == "Insufficient Storage")
    }
}

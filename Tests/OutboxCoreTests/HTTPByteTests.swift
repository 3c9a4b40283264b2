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

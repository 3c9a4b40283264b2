import Foundation
import Glibc
@testable import OutboxModel
@testable import OutboxStorage
import Testing

/// The pieces of a streamed operation view: UTF-8 validity and base64 over bytes cut anywhere,
/// a streamed JSON text equal to the one the renderer gives whole, and a `created` record read
/// back piece by piece (checked, its body handed out as a range of the log).
@Suite("Streamed operation views")
struct StreamedViewTests {
    /// Byte strings around every rule of UTF-8 validity.
    static let utf8Cases: [[UInt8]] = [
        [], Array("plain ascii".utf8), Array("é€😀".utf8), [0xC3], [0xC3, 0x28], [0xC0, 0x80], [0xC1, 0xBF], [0xC2, 0x80],
        [0xE0, 0x80, 0x80], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xED, 0xA0, 0x80], [0xEF, 0xBF, 0xBF],
        [0xF0, 0x8F, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80],
        [0xF5, 0x80, 0x80, 0x80], [0xFF], [0x80], [0xE2, 0x82], Array("abcdefgh".utf8) + [0xE2, 0x82, 0xAC] + Array("ijklmnop".utf8),
        Array("abcdefghijklmnop".utf8) + [0xF0, 0x9F, 0x98], [0x7F, 0x00, 0x41],
    ]

    @Test func utf8ValidationAgreesWithTheStandardLibrary_ForBytesCutAtEveryPoint() {
        var random = SystemRandomNumberGenerator()
        let randomCases = (0..<200).map { _ in
            (0..<Int.random(in: 0...24, using: &random)).map { _ in
                // Mostly ASCII and lead/continuation bytes, so that valid multi-byte text occurs too.
                [UInt8.random(in: 0x20...0x7E, using: &random), UInt8.random(in: 0x80...0xBF, using: &random),
                 UInt8.random(in: 0xC2...0xF4, using: &random), UInt8.random(in: 0...0xFF, using: &random)][Int.random(in: 0...3, using: &random)]
            }
        }
        for bytes in Self.utf8Cases + randomCases {
            let expected = String(validating: bytes, as: UTF8.self) != nil
            for cut in 0...bytes.count {
                var validation = UTF8Validation()
                bytes.withUnsafeBytes { raw in
                    validation.add(UnsafeRawBufferPointer(rebasing: raw[..<cut]))
                    validation.add(UnsafeRawBufferPointer(rebasing: raw[cut...]))
                }
                #expect(validation.isValid == expected, "\(bytes) cut at \(cut)")
            }
        }
    }

    @Test func base64InPiecesOfThreeIsFoundationsEncoding() {
        let bytes = (0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        for count in 0...bytes.count {
            let slice = Array(bytes[..<count])
            var out: [UInt8] = []
            slice.withUnsafeBytes { raw in
                var start = 0
                while start < count {
                    let end = min(count, start + 9)
                    Base64.append(UnsafeRawBufferPointer(rebasing: raw[start..<end]), to: &out)
                    start = end
                }
            }
            #expect(String(decoding: out, as: UTF8.self) == Data(slice).base64EncodedString(), "\(count) bytes")
            #expect(out.count == Base64.encodedCount(count))
        }
    }

    /// A view-like document with two streamed strings, in both forms.
    private static func document(body: String, response: String) -> JSON {
        .object([("id", .string("x")), ("headers", .array([.array([.string("A"), .string("b\"c")])])),
                 ("body", .string(body)), ("n", .int(3)),
                 ("response", .object([("status", .int(201)), ("body", .string(response))]))])
    }

    @Test func streamedTextIsTheRenderedText_InEveryLayoutFormAndPieceSize() throws {
        let text = String(repeating: "é\"\\\n\u{1}😀 abc ", count: 3000)
        let binary = (0..<100_001).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
        #expect(String(validating: binary, as: UTF8.self) == nil)
        for pretty in [false, true] {
            for (bytes, shown) in [(Array(text.utf8), text), (binary, Data(binary).base64EncodedString())] {
                let form = BodyJSONForm(of: bytes)
                let small = Array("ok\n".utf8)
                let body = StreamedJSON.placeholder(0), response = StreamedJSON.placeholder(1)
                let texts = [body: StreamedJSON.Text(source: bytes, form: form),
                             response: StreamedJSON.Text(source: small, form: BodyJSONForm(of: small))]
                let expected = Array((Self.document(body: shown, response: "ok\n").rendered(pretty: pretty) + "\n").utf8)
                for budget in [1, 100, 64 * 1024] {
                    var streamed = StreamedJSON(Self.document(body: body, response: response), pretty: pretty, trailer: "\n", texts: texts)
                    #expect(streamed.count == expected.count)
                    var out: [UInt8] = []
                    var steps = 0
                    while try streamed.write(into: &out, budget: budget) { steps += 1 }
                    #expect(out == expected, "pretty \(pretty), \(form), budget \(budget)")
                    #expect(streamed.isComplete)
                    if budget == 64 * 1024 { #expect(steps >= bytes.count / (64 * 1024)) }
                }
            }
        }
    }

    @Test func aStoredResponseWithItsBodyOmittedRoundTrips_AndOldRecordsKeepTheirBodies() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        let request = StorageSamples.request(1)
        let omitted = StoredResponse(status: 201, headers: ["X": "y"], body: [], omittedBodySize: 3 << 20)
        let kept = StoredResponse(status: 409, headers: ["Z": "w"], body: Array("whole".utf8))
        let both = OperationState(status: .completed, retryCount: 1, response: omitted, conflict: kept)
        let conflicted = OperationState(status: .conflict, conflict: StoredResponse(status: 409, headers: [:], body: [], omittedBodySize: 0))
        _ = try await log.append(.created(request, OperationState()))
        #expect(try log.readState(at: try await log.append(.updated(request.id, both))) == both)
        #expect(try log.readState(at: try await log.append(.updated(request.id, conflicted))) == conflicted)

        // A record written before the omitted bits existed has them clear: its body is whole.
        let old = OperationState(status: .completed, response: StoredResponse(status: 200, headers: [:], body: Array(repeating: 7, count: 1 << 20)))
        #expect(try log.readState(at: try await log.append(.updated(request.id, old))) == old)
    }

    @Test func aCreatedRecordReadInPiecesGivesItsRequestAndItsBodyAsARangeOfTheLog() async throws {
        let directory = try StorageTestDirectory()
        let (log, _) = try StorageSamples.open(directory)
        var request = StorageSamples.request(4, bodySize: 300_007)
        request.headers.add("X-Long", String(repeating: "h", count: 70_000))
        let location = try await log.append(.created(request, OperationState()))
        _ = try await log.append(.created(StorageSamples.request(5), OperationState()))

        var visited: [UInt8] = []
        let (head, body) = try log.readRequestHead(at: location) { visited.append(contentsOf: $0) }
        var expected = request
        expected.body = []
        #expect(head == expected)
        #expect(visited == request.body)
        #expect(body.count == request.body.count)
        var again = [UInt8](repeating: 0, count: body.count)
        try again.withUnsafeMutableBytes { try body.read(at: 0, into: $0) }
        #expect(again == request.body)

        // One flipped byte in the body: the checksum, checked over every piece, refuses it.
        // Written in place: the log reads through the descriptor it holds.
        let path = directory.segmentPath(Int(location.segment))
        let at = Int(location.offset) + Int(location.length) - 1000
        var byte = try directory.bytes(of: path)[at] ^ 0x40
        let fd = open(path, O_WRONLY)
        #expect(fd >= 0)
        #expect(pwrite(fd, &byte, 1, off_t(at)) == 1)
        close(fd)
        #expect(throws: StorageError.self) { try log.readRequestHead(at: location) { _ in } }
    }
}

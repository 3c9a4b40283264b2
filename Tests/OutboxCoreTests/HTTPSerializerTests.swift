@testable import OutboxHTTP
import Testing

@Suite("HTTPSerializer")
struct HTTPSerializerTests {
    @Test func requestHeadIsWrittenAsRequestLineFieldsAndBlankLine() {
        var buffer: [UInt8] = []
        HTTPSerializer.writeRequestHead(
            HTTPRequestHead(method: "POST", target: "/v1/items?x=1", headers: [("Host", "api"), ("Content-Length", "2")]),
            into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self)
                == "POST /v1/items?x=1 HTTP/1.1\r\nHost: api\r\nContent-Length: 2\r\n\r\n")
    }

    @Test func responseHeadUsesTheStandardReasonAndKeepsTheSpaceBeforeAnEmptyOne() {
        var buffer: [UInt8] = []
        HTTPSerializer.writeResponseHead(HTTPResponseHead(status: 502, headers: ["Content-Length": "0"]), into: &buffer)
        HTTPSerializer.writeResponseHead(HTTPResponseHead(version: .http1_0, status: 299, reason: ""), into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self)
                == "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\nHTTP/1.0 299 \r\n\r\n")
    }

    @Test func startLinesCannotBeSplitByLineBreaksInStrings() {
        var buffer: [UInt8] = []
        HTTPSerializer.writeRequestHead(HTTPRequestHead(method: "GET", target: "/a\r\nX: y", headers: ["Host": "h"]), into: &buffer)
        HTTPSerializer.writeResponseHead(HTTPResponseHead(status: 200, reason: "OK\r\nX: y"), into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self)
                == "GET /a  X: y HTTP/1.1\r\nHost: h\r\n\r\nHTTP/1.1 200 OK  X: y\r\n\r\n")
    }

    @Test func chunksAreHexSizeDataCRLFAndEmptyDataWritesNothing() {
        var buffer: [UInt8] = []
        let data = [UInt8](repeating: UInt8(ascii: "a"), count: 26)
        HTTPSerializer.writeChunk(data[...], into: &buffer)
        HTTPSerializer.writeChunk([UInt8]()[...], into: &buffer)
        Array("hello".utf8).withUnsafeBytes { HTTPSerializer.writeChunk($0, into: &buffer) }
        [UInt8]().withUnsafeBytes { HTTPSerializer.writeChunk($0, into: &buffer) }
        HTTPSerializer.writeLastChunk(trailers: ["X-Sum": "1"], into: &buffer)
        HTTPSerializer.writeLastChunk(trailers: [], into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self)
                == "1a\r\n" + String(repeating: "a", count: 26) + "\r\n5\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n0\r\n\r\n")
    }

    @Test func largeChunkSizesAreWrittenInFullHex() {
        var buffer: [UInt8] = []
        let data = [UInt8](repeating: 0, count: 0x10000)
        HTTPSerializer.writeChunk(data[...], into: &buffer)
        #expect(Array(buffer.prefix(7)) == Array("10000\r\n".utf8))
        #expect(buffer.count == 7 + 0x10000 + 2)
    }

    @Test func requestRoundTripsThroughTheParser() throws {
        let head = HTTPRequestHead(method: "PUT", target: "http://h:9/x", version: .http1_1,
                                   headers: [("Host", "h:9"), ("Transfer-Encoding", "chunked"), ("X-Dup", "1"), ("x-dup", "2")])
        var buffer: [UInt8] = []
        HTTPSerializer.writeRequestHead(head, into: &buffer)
        HTTPSerializer.writeChunk(Array("hello ".utf8)[...], into: &buffer)
        HTTPSerializer.writeChunk(Array("world".utf8)[...], into: &buffer)
        HTTPSerializer.writeLastChunk(trailers: ["X-Trailer": "t"], into: &buffer)

        let outcome = drive(HTTPRequestParser(), buffer, cuts: [], compact: false)
        #expect(outcome == .messages([ParsedMessage(
            startLine: "PUT http://h:9/x HTTP/1.1", headers: lines(head.headers), framing: .chunked,
            body: Array("hello world".utf8), trailers: ["X-Trailer: t"], complete: true)]))

        var parser = HTTPRequestParser()
        var index = 0
        let first = try parser.next(in: buffer, index: &index)
        #expect(first == .head(head, .chunked))
    }

    @Test func responseRoundTripsThroughTheParser() throws {
        let head = HTTPResponseHead(version: .http1_0, status: 404, headers: [("Content-Length", "3"), ("Server", "t")])
        var buffer: [UInt8] = []
        HTTPSerializer.writeResponseHead(head, into: &buffer)
        buffer.append(contentsOf: "abc".utf8)
        var parser = HTTPResponseParser()
        parser.expectResponse(toMethod: "GET")
        var index = 0
        #expect(try parser.next(in: buffer, index: &index) == .head(head, .contentLength(3)))
        #expect(try parser.next(in: buffer, index: &index) == .body(buffer.count - 3..<buffer.count))
        #expect(try parser.next(in: buffer, index: &index) == .end(trailers: []))
        #expect(parser.isIdle)
    }
}

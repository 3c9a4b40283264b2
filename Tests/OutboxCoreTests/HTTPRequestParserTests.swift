@testable import OutboxHTTP
import Testing

@Suite("HTTPRequestParser")
struct HTTPRequestParserTests {
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func eventsComeInOrderWithBodyRangesIntoTheCallersBuffer() throws {
        var parser = HTTPRequestParser()
        let buffer = bytes("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET")
        var index = 0
        let head = try parser.next(in: buffer, index: &index)
        #expect(head == .head(HTTPRequestHead(method: "POST", target: "/x", headers: [("Host", "h"), ("Content-Length", "3")]),
                              .contentLength(3)))
        let bodyStart = buffer.count - 6
        #expect(index == bodyStart)
        #expect(try parser.next(in: buffer, index: &index) == .body(bodyStart..<(bodyStart + 3)))
        #expect(try parser.next(in: buffer, index: &index) == .end(trailers: []))
        #expect(parser.isIdle)
        #expect(try parser.next(in: buffer, index: &index) == nil)
        #expect(!parser.isIdle, "a partial request line was seen")
        #expect(throws: HTTPParseError.incompleteMessage) { try parser.finish() }
    }

    @Test func contentLengthZeroEndsWithoutABodyEvent() throws {
        var parser = HTTPRequestParser()
        let buffer = bytes("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")
        var index = 0
        guard case .head(_, .contentLength(0)) = try parser.next(in: buffer, index: &index) else {
            Issue.record("expected a head with Content-Length 0")
            return
        }
        #expect(try parser.next(in: buffer, index: &index) == .end(trailers: []))
        #expect(index == buffer.count)
    }

    @Test func afterAnErrorTheSameErrorIsThrownAgain() {
        var parser = HTTPRequestParser()
        var index = 0
        let bad = bytes("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 2\r\n\r\n")
        #expect(throws: HTTPParseError.invalidContentLength) { try parser.next(in: bad, index: &index) }
        var fresh = 0
        let good = bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(throws: HTTPParseError.invalidContentLength) { try parser.next(in: good, index: &fresh) }
        #expect(throws: HTTPParseError.invalidContentLength) { try parser.finish() }
        #expect(!parser.isIdle)
    }

    @Test func finishBetweenMessagesAndAfterBlankLinesIsANoOp() throws {
        var parser = HTTPRequestParser()
        try parser.finish()
        var index = 0
        #expect(try parser.next(in: bytes("\r\n\r\n"), index: &index) == nil)
        #expect(index == 4, "blank lines before a request are consumed")
        #expect(parser.isIdle)
        try parser.finish()
    }

    @Test func chunkedBodyOverTheLimitThrowsBeforeEmittingTheCrossingChunk() throws {
        var parser = HTTPRequestParser(limits: HTTPParserLimits(maxBodyBytes: 8))
        let buffer = bytes("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n")
        var index = 0
        var body: [UInt8] = []
        var thrown: HTTPParseError?
        do {
            for _ in 0..<10 {
                guard let event = try parser.next(in: buffer, index: &index) else { break }
                if case .body(let range) = event { body += buffer[range] }
            }
        } catch {
            thrown = error
        }
        #expect(thrown == .bodyTooLarge)
        #expect(body == bytes("hello"))
    }

    @Test func oversizedHeadIsRefusedAsSoonAsTheLimitIsCrossed() throws {
        var parser = HTTPRequestParser(limits: HTTPParserLimits(maxHeaderBytes: 32))
        var buffer = bytes("GET / HTTP/1.1\r\nX-Long: ")
        var index = 0
        #expect(try parser.next(in: buffer, index: &index) == nil)
        buffer += [UInt8](repeating: UInt8(ascii: "a"), count: 7)   // exactly 32 bytes seen
        #expect(try parser.next(in: buffer, index: &index) == nil)
        buffer.append(UInt8(ascii: "a"))
        #expect(throws: HTTPParseError.headerTooLarge) { try parser.next(in: buffer, index: &index) }
    }

    @Test func connectLeavesTunnelBytesAndStaysUpgraded() throws {
        var parser = HTTPRequestParser()
        let buffer = bytes("CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n\u{16}\u{3}")
        var index = 0
        guard case .head(let head, .none) = try parser.next(in: buffer, index: &index) else {
            Issue.record("expected the CONNECT head")
            return
        }
        #expect(head.method == "CONNECT" && head.target == "h:443")
        #expect(parser.isUpgraded && !parser.isIdle)
        #expect(index == buffer.count - 2)
        #expect(try parser.next(in: buffer, index: &index) == nil)
        #expect(index == buffer.count - 2)
        try parser.finish()
    }

    @Test func headLinesAreConsumedAsTheyCompleteSoTheCallerNeedNotKeepThem() throws {
        var parser = HTTPRequestParser()
        var index = 0
        let first = bytes("GET /a HTTP/1.1\r\nHo")
        #expect(try parser.next(in: first, index: &index) == nil)
        #expect(index == 17, "the request line is consumed, the partial field line is not")
        // The caller drops consumed bytes and appends new ones.
        let second = Array(first[index...]) + bytes("st: h\r\n\r\n")
        index = 0
        let event = try parser.next(in: second, index: &index)
        #expect(event == .head(HTTPRequestHead(method: "GET", target: "/a", headers: ["Host": "h"]), .none))
    }

    @Test func parseErrorsMapToTheStatusAServerAnswers() {
        let expected: [(HTTPParseError, Int)] = [
            (.malformedStartLine, 400), (.malformedHeader, 400), (.obsFold, 400), (.bareCR, 400),
            (.headerTooLarge, 431), (.invalidHost, 400), (.conflictingFraming, 400), (.invalidContentLength, 400),
            (.unsupportedTransferEncoding, 501), (.invalidChunk, 400), (.bodyTooLarge, 413),
            (.unsupportedVersion, 505), (.incompleteMessage, 400),
        ]
        for (error, status) in expected {
            #expect(error.status == status, "\(error)")
            #expect(error.message.hasSuffix("."), "\(error) has a one-sentence message")
        }
    }
}

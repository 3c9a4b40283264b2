@testable import OutboxHTTP
import Testing

@Suite("HTTPResponseParser")
struct HTTPResponseParserTests {
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func finishEndsACloseDelimitedBodyAndIsNilBetweenMessages() throws {
        var parser = HTTPResponseParser()
        #expect(try parser.finish() == nil)
        parser.expectResponse(toMethod: "GET")
        let buffer = bytes("HTTP/1.0 200 OK\r\n\r\nabc")
        var index = 0
        guard case .head(_, .untilClose) = try parser.next(in: buffer, index: &index) else {
            Issue.record("expected a close-delimited head")
            return
        }
        #expect(try parser.next(in: buffer, index: &index) == .body(19..<22))
        #expect(try parser.next(in: buffer, index: &index) == nil)
        #expect(try parser.finish() == .end(trailers: []))
        #expect(parser.isIdle)
    }

    @Test func finishInsideAContentLengthBodyIsIncomplete() throws {
        var parser = HTTPResponseParser()
        parser.expectResponse(toMethod: "GET")
        let buffer = bytes("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab")
        var index = 0
        _ = try parser.next(in: buffer, index: &index)
        _ = try parser.next(in: buffer, index: &index)
        #expect(throws: HTTPParseError.incompleteMessage) { try parser.finish() }
        #expect(throws: HTTPParseError.incompleteMessage) { try parser.next(in: buffer, index: &index) }
    }

    @Test func interimResponsesDoNotConsumeTheAnnouncedRequest() throws {
        var parser = HTTPResponseParser()
        parser.expectResponse(toMethod: "HEAD")
        parser.expectResponse(toMethod: "GET")
        let buffer = bytes("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n"
                           + "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nxyz")
        let outcome = drive(parser, buffer, cuts: [], compact: false)
        #expect(outcome == .messages([
            ParsedMessage(startLine: "HTTP/1.1 100 Continue", headers: [], framing: .none, complete: true),
            ParsedMessage(startLine: "HTTP/1.1 200 OK", headers: ["Content-Length: 3"], framing: .none, complete: true),
            ParsedMessage(startLine: "HTTP/1.1 200 OK", headers: ["Content-Length: 3"], framing: .contentLength(3),
                          body: bytes("xyz"), complete: true),
        ]))
    }

    @Test func aLongKeepAliveConnectionMatchesEveryResponseToItsRequest() throws {
        var parser = HTTPResponseParser()
        var buffer: [UInt8] = []
        // Alternate HEAD and GET so that a mismatch would misframe a body.
        for round in 0..<300 {
            parser.expectResponse(toMethod: round % 2 == 0 ? "HEAD" : "GET")
            buffer += bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n")
            if round % 2 == 1 { buffer += bytes("ok") }
        }
        let outcome = drive(parser, buffer, cuts: [], compact: false)
        guard case .messages(let messages, nil) = outcome else {
            Issue.record("unexpected \(outcome)")
            return
        }
        #expect(messages.count == 300)
        #expect(messages.enumerated().allSatisfy { $0.element.body.count == ($0.offset % 2 == 0 ? 0 : 2) && $0.element.complete })
    }
}

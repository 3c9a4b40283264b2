@testable import OutboxHTTP
import Testing

@Suite("HTTPHeaders")
struct HTTPHeadersTests {
    private let sample: HTTPHeaders = [
        ("Host", "a.example"), ("Set-Cookie", "a=1"), ("Accept", "text/html"), ("set-cookie", "b=2"),
    ]

    @Test func fieldsKeepTheirOrderAndDuplicates() {
        #expect(sample.count == 4)
        #expect(sample.map(\.name) == ["Host", "Set-Cookie", "Accept", "set-cookie"])
        #expect(sample.map(\.value) == ["a.example", "a=1", "text/html", "b=2"])
        #expect(sample[1].name == "Set-Cookie" && sample[1].value == "a=1")
    }

    /// The bulk builder the log reads headers back with gives the same list as adding the
    /// fields one by one; a builder that gives up gives no list.
    @Test func aListBuiltInBulkEqualsOneBuiltFieldByField() throws {
        let pairs: [(String, String)] = [("Host", "api.example.test"), ("X-Empty", ""), ("Accept", "*/*"), ("host", "again")]
        let byteCount = pairs.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 }
        let bulk = try #require(HTTPHeaders(validatedCount: pairs.count, byteCount: byteCount) { builder in
            for (name, value) in pairs {
                Array(name.utf8).withUnsafeBytes { nameBytes in
                    Array(value.utf8).withUnsafeBytes { builder.add(name: nameBytes, value: $0) }
                }
            }
            return true
        })
        let single = HTTPHeaders(pairs.map { (name: $0.0, value: $0.1) })
        #expect(bulk == single)
        #expect(bulk.values("host") == ["api.example.test", "again"])
        #expect(HTTPHeaders(validatedCount: 2, byteCount: 20) { _ in false } == nil)
    }

    @Test func lookupIgnoresNameCase() {
        #expect(sample.first("SET-COOKIE") == "a=1")
        #expect(sample.values("set-cookie") == ["a=1", "b=2"])
        #expect(sample.count(of: "Set-Cookie") == 2)
        #expect(sample.contains("accept"))
        #expect(!sample.contains("Accept-Encoding"))
        #expect(sample.first("Missing") == nil)
        #expect(sample.values("Missing").isEmpty)
    }

    @Test func valuesAreNotCommaSplit() {
        let headers: HTTPHeaders = ["Accept": "a, b"]
        #expect(headers.values("Accept") == ["a, b"])
    }

    @Test func tokensSplitListsTrimLowercaseAndDropEmptyElements() {
        let headers: HTTPHeaders = [("Connection", " Keep-Alive ,, X-Foo"), ("Other", "close"), ("connection", "\tUpgrade,")]
        #expect(headers.tokens("Connection") == ["keep-alive", "x-foo", "upgrade"])
        #expect(headers.containsToken("x-FOO", in: "CONNECTION"))
        #expect(!headers.containsToken("close", in: "Connection"))
        #expect(headers.tokens("Missing").isEmpty)
    }

    @Test func removeAllRemovesEveryFieldOfThatNameAndKeepsTheRest() {
        var headers = sample
        headers.removeAll("SET-cookie")
        #expect(headers.map(\.name) == ["Host", "Accept"])
        headers.removeAll("Not-There")
        #expect(headers.count == 2)
    }

    @Test func removeAllLowercasedNamesRemovesHopByHopFields() {
        var headers: HTTPHeaders = [
            ("Connection", "close"), ("Host", "a"), ("Keep-Alive", "timeout=5"),
            ("X-Forwarded-For", "1.2.3.4"), ("Transfer-Encoding", "chunked"), ("Proxy-Authorization", "Basic x"),
        ]
        headers.removeAll(lowercasedNames: ["connection", "keep-alive", "transfer-encoding", "proxy-authorization"])
        #expect(headers == [("Host", "a"), ("X-Forwarded-For", "1.2.3.4")])
    }

    @Test(arguments: [
        ["a"], ["b"], ["e"], ["a", "b"], ["b", "c", "d"], ["a", "e"], ["a", "b", "c", "d", "e"], ["x"],
    ])
    func removalKeepsTheOtherFieldsIntactWhereverTheRemovedOnesSit(_ removed: Set<String>) {
        let all: [(name: String, value: String)] = [("A", "1"), ("b", "22"), ("C", ""), ("d", "4444"), ("E", "5")]
        let expected = all.filter { !removed.contains($0.name.lowercased()) }
        var headers = HTTPHeaders(all)
        let shared = headers
        headers.removeAll(lowercasedNames: removed)
        #expect(headers == HTTPHeaders(expected))
        #expect(shared == HTTPHeaders(all), "a copy sharing the storage is not affected")
        var written: [UInt8] = []
        headers.write(into: &written)
        #expect(String(decoding: written, as: UTF8.self) == expected.map { "\($0.name): \($0.value)\r\n" }.joined())
        headers.add("F", "6")
        #expect(headers.first("f") == "6" && headers.count == expected.count + 1)
    }

    @Test func replaceOrAddRemovesAllThenAppends() {
        var headers = sample
        headers.replaceOrAdd("Set-Cookie", "c=3")
        #expect(headers.map(\.name) == ["Host", "Accept", "Set-Cookie"])
        #expect(headers.values("set-cookie") == ["c=3"])
    }

    @Test func writeEmitsEveryFieldByteForByte() {
        var buffer = Array("x".utf8)
        sample.write(into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self)
                == "xHost: a.example\r\nSet-Cookie: a=1\r\nAccept: text/html\r\nset-cookie: b=2\r\n")
        var afterRemoval = sample
        afterRemoval.removeAll("Host")
        var written: [UInt8] = []
        afterRemoval.write(into: &written)
        #expect(String(decoding: written, as: UTF8.self) == "Set-Cookie: a=1\r\nAccept: text/html\r\nset-cookie: b=2\r\n")
    }

    @Test func addCannotInjectLineBreaks() {
        var headers = HTTPHeaders()
        headers.add("X-Evil", "a\r\nSet-Cookie: pwned\u{0}")
        var written: [UInt8] = []
        headers.write(into: &written)
        #expect(String(decoding: written, as: UTF8.self) == "X-Evil: a  Set-Cookie: pwned \r\n")
    }

    @Test func equalityComparesNamesCaseInsensitivelyValuesExactlyAndOrder() {
        #expect(HTTPHeaders([("Host", "a")]) == HTTPHeaders([("HOST", "a")]))
        #expect(HTTPHeaders([("Host", "a")]) != HTTPHeaders([("Host", "A")]))
        #expect(HTTPHeaders([("A", "1"), ("B", "2")]) != HTTPHeaders([("B", "2"), ("A", "1")]))
        #expect(HTTPHeaders([("A", "1")]) != HTTPHeaders([("A", "1"), ("A", "1")]))
        #expect(HTTPHeaders() == [])
        #expect(HTTPHeaders().isEmpty)
    }

    @Test func parsedFieldsAreStoredAndWrittenLikeAddedOnes() throws {
        var parser = HTTPRequestParser()
        let bytes = Array("GET / HTTP/1.1\r\nHost:a\r\nX-Obs:  caf\u{e9} \r\n\r\n".utf8)
        var index = 0
        guard case .head(let head, _) = try parser.next(in: bytes, index: &index) else {
            Issue.record("expected a head")
            return
        }
        #expect(head.headers == [("Host", "a"), ("X-Obs", "café")])
        var written: [UInt8] = []
        head.headers.write(into: &written)
        #expect(String(decoding: written, as: UTF8.self) == "Host: a\r\nX-Obs: café\r\n")
    }
}

@testable import OutboxModel
import Testing

/// One JSON model for both directions: what it writes, in every layout, reads back as the
/// same document.
@Suite("JSON")
struct JSONTests {
    static let document: JSON = .object([
        ("text", .string("café \"quoted\" \\ tab\t line\nnul\u{0} del\u{7F} snowman ☃ 𝄞")),
        ("int", .int(-9_007_199_254_740_993)), ("double", .double(0.1)), ("integral", .double(604_800.5)),
        ("flags", .array([.bool(true), .bool(false), .null])),
        ("nested", .array([.array([.string("Set-Cookie"), .string("a=1")]), .object([]), .array([])])),
        ("empty", .object([])), ("key with \"quotes\"", .object([("inner", .int(0))])),
    ])

    @Test(arguments: [(false, false), (true, false), (true, true)])
    func everyLayoutReadsBackAsTheSameDocument(pretty: Bool, scalarArraysInline: Bool) throws {
        let text = Self.document.rendered(pretty: pretty, scalarArraysInline: scalarArraysInline)
        #expect(try JSONReader.parse(Array(text.utf8)) == Self.document, "\(text)")
    }

    @Test func layoutsDifferOnlyInWhitespace() {
        #expect(JSON.array([.int(1), .string("a")]).rendered() == #"[1,"a"]"#)
        #expect(JSON.array([.int(1), .string("a")]).rendered(pretty: true) == "[\n  1,\n  \"a\"\n]")
        #expect(JSON.array([.int(1), .string("a")]).rendered(pretty: true, scalarArraysInline: true) == #"[1, "a"]"#)
        #expect(JSON.object([("a", .array([.array([])]))]).rendered(pretty: true, scalarArraysInline: true)
                == "{\n  \"a\": [\n    []\n  ]\n}")
    }

    @Test func integersAndOtherNumbersStayApart() throws {
        #expect(try JSONReader.parse(Array("[1, 1.0, 1e0]".utf8)) == .array([.int(1), .double(1), .double(1)]))
        #expect(JSON.int(1) != JSON.double(1))
    }
}

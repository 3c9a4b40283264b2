import OutboxHTTP
import OutboxModel
import OutboxPostgres
import Testing

/// The one-pass reader of header lists as PostgreSQL prints a `jsonb` array: the same headers
/// as the general JSON reader for every text the store can get back (plain, spaced as `jsonb`
/// prints it, with escapes, beyond ASCII), nothing for a text of another shape.
struct PostgresRowTextTests {
    static let lists: [HTTPHeaders] = [
        HTTPHeaders([]),
        HTTPHeaders([("Host", "api.example.test:8080")]),
        HTTPHeaders([("Host", "a"), ("X-Note", "zürich"), ("X-Note", "second"), ("Content-Type", "application/json")]),
        HTTPHeaders([("X-Quoted", "say \"hi\""), ("X-Path", "C:\\dir"), ("X-Lines", "a\tb")]),
    ]

    @Test(arguments: lists)
    func headersComeBackAsWritten(_ headers: HTTPHeaders) throws {
        let compact = PostgresOperations.headersJSON(headers)
        // jsonb prints a space after each comma.
        let spaced = compact.replacingOccurrences(of: "\",\"", with: "\", \"").replacingOccurrences(of: "],[", with: "], [")
        for text in [compact, spaced, " \(spaced) "] {
            #expect(PostgresRowText.headers(text) == headers, "\(text)")
            #expect(PostgresOperations.headersReadAsJSON(text) == headers, "\(text)")
        }
    }

    @Test(arguments: ["", "[", "[[\"a\"]]", "[[\"a\", 1]]", "{}", "[[\"a\", \"b\"]] x", "[[\"a\", \"b\"],]", "[[\"a\", \"b\", \"c\"]]"])
    func anotherShapeIsNoHeaders(_ text: String) {
        #expect(PostgresRowText.headers(text) == nil)
    }

    @Test func anOriginIsReadOnceAndAgain() throws {
        let first = try #require(PostgresRowText.origin("https://api.example.test:8443"))
        #expect(PostgresRowText.origin("https://api.example.test:8443") == first)
        #expect(first.description == "https://api.example.test:8443")
        #expect(PostgresRowText.origin("not an origin") == nil)
    }
}

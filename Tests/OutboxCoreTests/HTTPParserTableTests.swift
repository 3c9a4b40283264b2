@testable import OutboxHTTP
import Testing

/// The message table: every row is parsed whole, split in two at every byte boundary, and one
/// byte at a time; all feedings must give the row's expected outcome.
@Suite("HTTP parser table")
struct HTTPParserTableTests {
    @Test("the table covers at least 80 messages")
    func tableIsLargeEnough() {
        #expect(requestCases.count + responseCases.count >= 80)
    }

    @Test("request parses the same whole, split anywhere, and byte by byte", arguments: requestCases)
    func requestRow(_ row: ParserCase) {
        check(row)
    }

    @Test("response parses the same whole, split anywhere, and byte by byte", arguments: responseCases)
    func responseRow(_ row: ParserCase) {
        check(row)
    }

    private func check(_ row: ParserCase) {
        let outcomes: [(String, ParseOutcome)]
        switch row.kind {
        case .request:
            outcomes = outcomesOfEveryFeeding({ HTTPRequestParser(limits: row.limits) }, row.input)
        case .response(let methods):
            outcomes = outcomesOfEveryFeeding({
                var parser = HTTPResponseParser(limits: row.limits)
                for method in methods { parser.expectResponse(toMethod: method) }
                return parser
            }, row.input)
        }
        // Report only the first differing feeding per row, so a broken rule reads as one failure.
        if let (feeding, outcome) = outcomes.first(where: { $0.1 != row.expected }) {
            Issue.record("\(row.name) fed \(feeding):\n  got      \(outcome)\n  expected \(row.expected)")
        }
    }
}

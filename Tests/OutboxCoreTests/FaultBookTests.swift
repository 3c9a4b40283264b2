import OutboxFaults
import OutboxModel
import Testing

@Suite("Fault rules")
struct FaultBookTests {
    static let origin = Origin(scheme: .http, host: "127.0.0.1", port: 9000)
    static let other = Origin(scheme: .https, host: "api.example", port: 443)

    static func rule(_ text: String, now: Int64 = 0) throws -> FaultRule {
        try FaultRule.parse(try JSONReader.parse(Array(text.utf8)), now: now, makeID: { "generated" }, randomSeed: { 7 })
    }

    static func decide(_ book: FaultBook, _ origin: Origin = origin, method: String = "POST", target: String = "/v1/orders/1",
                       kind: UpstreamRequestKind = .direct, now: Int64 = 0) -> FaultRule.Action? {
        book.decide(origin: origin, method: method, target: target, kind: kind, now: now)
    }

    @Test func matchingByOriginMethodPathAndScope() throws {
        let book = FaultBook()
        #expect(book.add(try Self.rule(#"{"match":{"origin":"http://127.0.0.1:9000","method":"POST","pathPrefix":"/v1/orders"},"applyTo":"replay","action":"reset"}"#)) == .added)
        #expect(Self.decide(book, kind: .replay) == .reset)
        #expect(Self.decide(book, kind: .direct) == nil)
        #expect(Self.decide(book, Self.other, kind: .replay) == nil)
        #expect(Self.decide(book, method: "PUT", kind: .replay) == nil)
        #expect(Self.decide(book, target: "/v1/users", kind: .replay) == nil)
    }

    @Test func theBookHoldsAtMostAThousandRulesExhaustedOnesIncluded() throws {
        let book = FaultBook()
        for number in 1...FaultBook.maxRules {
            // Each one exhausted at once: a rule that no longer applies still takes its place.
            #expect(book.add(try Self.rule(#"{"id":"r\#(number)","action":"reset","times":1}"#)) == .added)
            _ = Self.decide(book)
        }
        #expect(FaultBook.maxRules == 1000)
        #expect(book.add(try Self.rule(#"{"id":"one-more","action":"reset"}"#)) == .full)
        #expect(book.add(try Self.rule(#"{"id":"r1","action":"reset"}"#)) == .idTaken, "a taken id is named as such even when full")
        #expect(book.rendered().count == 1000 && book.rendered("one-more") == nil)
        #expect(book.remove("r1"))
        #expect(book.add(try Self.rule(#"{"id":"one-more","action":"reset"}"#)) == .added)
        #expect(book.removeAll() == 1000)
    }

    @Test func theFirstRuleAddedDecidesAndTimesExhaustIt() throws {
        let book = FaultBook()
        #expect(book.add(try Self.rule(#"{"id":"first","action":"status","status":500,"times":2}"#)) == .added)
        #expect(book.add(try Self.rule(#"{"id":"second","action":"offline"}"#)) == .added)
        #expect(book.add(try Self.rule(#"{"id":"first","action":"reset"}"#)) == .idTaken, "a second rule with the same id")
        let decided = (0..<4).map { _ in Self.decide(book) }
        #expect(decided == [.status(500, retryAfterSeconds: nil, body: []), .status(500, retryAfterSeconds: nil, body: []), .offline, .offline])
        let rendered = book.rendered(now: 0)
        #expect(rendered.map { $0["exhausted"] } == [.bool(true), .bool(false)])
        #expect(rendered.map { $0["matched"] } == [.int(2), .int(2)])
    }

    @Test func aSeedGivesTheSameChoicesEveryTimeAndTheProbabilityRoughly() throws {
        func run(seed: Int) throws -> [Bool] {
            let book = FaultBook()
            _ = book.add(try Self.rule(#"{"action":"reset","probability":0.25,"seed":\#(seed)}"#))
            return (0..<400).map { _ in Self.decide(book) != nil }
        }
        let first = try run(seed: 42)
        #expect(first == (try run(seed: 42)))
        #expect(first != (try run(seed: 43)))
        // 400 draws at 0.25: 100 expected; 60…140 is more than six standard deviations wide.
        #expect((60...140).contains(first.filter { $0 }.count), "\(first.filter { $0 }.count) of 400")
    }

    @Test func forSecondsEndsTheRuleAndOfflineHoldsTheOriginMeanwhile() throws {
        let book = FaultBook()
        _ = book.add(try Self.rule(#"{"match":{"origin":"http://127.0.0.1:9000"},"action":"offline","forSeconds":1.5}"#, now: 10_000))
        #expect(book.holdsOffline(Self.origin, now: 11_000))
        #expect(!book.holdsOffline(Self.other, now: 11_000))
        #expect(Self.decide(book, now: 11_499) == .offline)
        #expect(Self.decide(book, now: 11_500) == nil)
        #expect(!book.holdsOffline(Self.origin, now: 11_500))
        #expect(book.rendered(now: 11_500).first?["exhausted"] == .bool(true))
    }

    @Test func aRuleRendersBackWithEveryFieldAndItsDefaults() throws {
        let rule = try Self.rule(#"{"action":"status","status":503}"#, now: 0)
        #expect(rule.rendered(matched: 0, applied: 0, exhausted: false).rendered() == #"{"id":"generated","match":{"origin":null,"method":null,"pathPrefix":null},"#
            + #""applyTo":"both","action":"status","status":503,"retryAfterSeconds":null,"body":"","times":null,"probability":1,"seed":null,"#
            + #""forSeconds":null,"matched":0,"applied":0,"exhausted":false}"#)
    }
}

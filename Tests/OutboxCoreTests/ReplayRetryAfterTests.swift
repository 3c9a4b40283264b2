@testable import OutboxReplay
import Testing

@Suite("Retry-After: delay-seconds and HTTP-date forms")
struct ReplayRetryAfterTests {
    /// Sun, 06 Nov 1994 08:49:37 GMT, the RFC's example date.
    static let exampleDate: Int64 = 784_111_777
    static let now: Int64 = (exampleDate - 10) * 1000

    @Test("valid values give the wait in seconds", arguments: [
        ("120", 120.0),
        ("0", 0),
        ("007", 7),
        ("99999999999999999999", RetryAfter.maximumSeconds),
        ("3153600001", RetryAfter.maximumSeconds),
        (String(repeating: "9", count: 5000), RetryAfter.maximumSeconds),
        ("Sun, 06 Nov 1994 08:49:37 GMT", 10),
        ("Sunday, 06-Nov-94 08:49:37 GMT", 10),
        ("Sun Nov  6 08:49:37 1994", 10),
        ("Sun, 06 Nov 1994 08:49:17 GMT", 0),
        ("Sun, 06 Nov 1994 09:49:37 GMT", 3610),
        ("Thu, 01 Jan 1970 00:00:00 GMT", 0),
        ("Tue, 29 Feb 2000 00:00:00 GMT", 167_670_633),
    ])
    func validValues(value: String, seconds: Double) {
        #expect(RetryAfter.seconds(value, nowMilliseconds: Self.now) == seconds)
    }

    @Test("a fractional now is honoured")
    func fractionalNow() {
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", nowMilliseconds: Self.exampleDate * 1000 - 1500) == 1.5)
    }

    @Test("invalid values give nil", arguments: [
        "", " ", "-1", "1.5", "12a", "+5", "soon",
        // What an origin may send that no delay-seconds is: never a trap, the backoff applies.
        "1e300", "-1e300", "1e-400", "0x10", "1_000", "NaN", "inf", "-99999999999999999999", "120 ", "1 20",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 31 Feb 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Foo 1994 08:49:37 GMT",
        "Xyz, 06 Nov 1994 08:49:37 GMT",
        "Sun, 29 Feb 1900 08:49:37 GMT",
        "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994",
        "Sun Nov  6 08:49:37 94",
    ])
    func invalidValues(value: String) {
        #expect(RetryAfter.seconds(value, nowMilliseconds: Self.now) == nil)
    }

    @Test("an RFC 850 two-digit year is the most recent one no more than 50 years ahead")
    func rfc850CenturyRule() {
        // now = 2026-01-01: "30" is 2030 (4 years ahead), "94" is 1994.
        let now2026 = Int64(RetryAfter.daysFromCivil(year: 2026, month: 1, day: 1)) * 86_400_000
        let in2030 = RetryAfter.seconds("Tuesday, 01-Jan-30 00:00:00 GMT", nowMilliseconds: now2026)
        #expect(in2030 == Double(RetryAfter.daysFromCivil(year: 2030, month: 1, day: 1) - RetryAfter.daysFromCivil(year: 2026, month: 1, day: 1)) * 86_400)
        #expect(RetryAfter.seconds("Sunday, 06-Nov-94 08:49:37 GMT", nowMilliseconds: now2026) == 0)
    }

    @Test("a header list with exactly one Retry-After is read, none or several are ignored")
    func headerField() {
        #expect(RetryAfter.seconds(in: ["Retry-After": "3"], nowMilliseconds: 0) == 3)
        #expect(RetryAfter.seconds(in: [:], nowMilliseconds: 0) == nil)
        #expect(RetryAfter.seconds(in: ["Retry-After": "3", "retry-after": "4"], nowMilliseconds: 0) == nil)
    }
}

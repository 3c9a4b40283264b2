@testable import OutboxModel
import Testing

/// The byte writers behind the `202` and the operation events give the same text as the
/// `String` renderers they stand in for.
@Suite("Byte rendering: JSON strings, integers and timestamps as bytes")
struct ByteRenderingTests {
    static let texts = [
        "", "plain", #"quote " and backslash \"#, "tab\t cr\r lf\n", "nul\u{0} unit\u{1F} del\u{7F}",
        "café ☃ 𝄞 \u{2028}", "/slash/ <html> {json}", String(repeating: "\u{1}", count: 40),
    ]

    /// `quoted(text)` itself writes bytes with `appendQuoted`; the scalar-by-scalar form (the
    /// one the logger's `alsoEscape` goes through, here escaping nothing more) must agree.
    @Test(arguments: texts)
    func quotedBytesAreTheQuotedString(text: String) {
        let scalarByScalar = JSON.quoted(text, alsoEscape: { _ in false })
        var out: [UInt8] = Array("prefix".utf8)
        JSON.appendQuoted(text, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "prefix" + scalarByScalar)
        #expect(JSON.quoted(text) == scalarByScalar)
        #expect(JSON.quotedCount(text) == scalarByScalar.utf8.count)
    }

    @Test func integersAreWrittenAsJSONWritesThem() {
        for value in [0, 1, -1, 9, 10, 99, 100, 12_345, -9_007_199_254_740_993, Int.max, Int.min] {
            var out: [UInt8] = []
            JSON.appendInt(value, to: &out)
            #expect(String(decoding: out, as: UTF8.self) == JSON.int(value).rendered())
        }
    }

    @Test func timestampsAreTheISO8601Text() {
        var instants: [Int64] = [
            0, -1, -999, -1000, -1001, 999, 1000, 951_782_400_000, 951_868_799_999, 4_107_542_400_000,
            253_402_300_799_999, 253_402_300_800_000, -62_135_596_800_000, -62_135_596_800_001, -86_400_000 * 365 * 2500,
        ]
        // Every leap-year rule in turn (1900 is not one, 2000 is, 2100 is not): a day in each
        // month of 1896-2104, at a second that differs from day to day.
        var day: Int64 = -27_028
        while day < 49_700 {
            instants.append(day * 86_400_000 + (day * 7_919 % 86_400) * 1000 + (day % 1000))
            day += 13
        }
        for millis in instants {
            var out: [UInt8] = []
            WallClock.appendISO8601(millis: millis, to: &out)
            #expect(String(decoding: out, as: UTF8.self) == WallClock.iso8601(millis: millis), "\(millis)")
            #expect(WallClock.iso8601ByteCount(millis: millis) == out.count, "\(millis)")
        }
    }
}

import OutboxHTTP
import OutboxModel

/// Reads an upstream's `Retry-After` field (RFC 9110 §10.2.3) as a wait in seconds.
///
/// Both forms are accepted: delay-seconds (`120`) and an HTTP-date (RFC 9110 §5.6.7): the
/// preferred IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) and, because the RFC says
/// recipients must, the obsolete RFC 850 and asctime forms. A date in the past means "now"
/// (0 s). Anything else is invalid and yields nil, so the caller falls back to its backoff.
public enum RetryAfter {
    /// Longest wait accepted, in seconds (about 100 years): larger values are clamped so that
    /// converting to milliseconds can never overflow.
    public static let maximumSeconds: Double = WallClock.maximumWaitSeconds

    /// The wait `value` asks for, in seconds from `nowMilliseconds` (ms since the epoch), or nil
    /// when `value` is neither delay-seconds nor an HTTP-date.
    public static func seconds(_ value: String, nowMilliseconds: Int64) -> Double? {
        let bytes = Array(value.utf8)
        guard let first = bytes.first else { return nil }
        if isDigit(first) {
            // delay-seconds = 1*DIGIT: the first byte rules out a sign, CheckedNumber the rest
            // (`1e300`, `1.5`, `12a` are invalid). Many digits stand for "a very long time":
            // clamped to maximumSeconds, as documented, rather than refused or overflowed.
            do throws(NumberError) {
                return Double(try CheckedNumber.integer(value, in: 0...Int(maximumSeconds)))
            } catch {
                return error.problem == .outOfRange ? maximumSeconds : nil
            }
        }
        guard let date = httpDateSeconds(bytes, nowMilliseconds: nowMilliseconds) else { return nil }
        let wait = Double(date) - Double(nowMilliseconds) / 1000
        return min(max(0, wait), maximumSeconds)
    }

    /// The wait the single `Retry-After` field of `headers` asks for; nil when there is none,
    /// more than one, or it is invalid.
    public static func seconds(in headers: HTTPHeaders, nowMilliseconds: Int64) -> Double? {
        let values = headers.values("Retry-After")
        guard values.count == 1, let value = values.first else { return nil }
        return seconds(value, nowMilliseconds: nowMilliseconds)
    }

    /// Seconds since the epoch for an HTTP-date in any of its three forms.
    static func httpDateSeconds(_ bytes: [UInt8], nowMilliseconds: Int64) -> Int64? {
        let text = String(decoding: bytes, as: UTF8.self)
        if bytes.count == 29, bytes[3] == UInt8(ascii: ",") {
            return imfFixdate(text)
        }
        if let comma = bytes.firstIndex(of: UInt8(ascii: ",")), comma > 3 {
            return rfc850Date(text, nowMilliseconds: nowMilliseconds)
        }
        return asctimeDate(text)
    }

    private static let dayNames = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let longDayNames = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT`
    private static func imfFixdate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","),
              dayNames.contains(String(parts[0].dropLast())), parts[5] == "GMT",
              parts[1].count == 2, let day = number(parts[1]),
              let month = monthNames.firstIndex(of: String(parts[2])),
              parts[3].count == 4, let year = number(parts[3]) else { return nil }
        return civilSeconds(year: year, month: month + 1, day: day, time: parts[4])
    }

    /// `Sunday, 06-Nov-94 08:49:37 GMT`; the two-digit year is read as RFC 9110 §5.6.7 says:
    /// one more than 50 years in the future means the most recent past year with those digits.
    private static func rfc850Date(_ text: String, nowMilliseconds: Int64) -> Int64? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0].hasSuffix(","), longDayNames.contains(String(parts[0].dropLast())),
              parts[3] == "GMT" else { return nil }
        let date = parts[1].split(separator: "-", omittingEmptySubsequences: false)
        guard date.count == 3, date[0].count == 2, let day = number(date[0]),
              let month = monthNames.firstIndex(of: String(date[1])),
              date[2].count == 2, let yy = number(date[2]) else { return nil }
        let currentYear = Int(WallClock.civilDate(daysSince1970: floorDivide(nowMilliseconds / 1000, 86_400)).year)
        var year = currentYear - currentYear % 100 + yy
        if year > currentYear + 50 { year -= 100 }
        return civilSeconds(year: year, month: month + 1, day: day, time: parts[2])
    }

    /// `Sun Nov  6 08:49:37 1994`: fixed columns, a one-digit day padded with a space.
    private static func asctimeDate(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 24, bytes[3] == 0x20, bytes[7] == 0x20, bytes[10] == 0x20, bytes[19] == 0x20 else {
            return nil
        }
        let field = { (range: Range<Int>) in Substring(String(decoding: bytes[range], as: UTF8.self)) }
        let dayField = bytes[8] == 0x20 ? field(9..<10) : field(8..<10)
        guard dayNames.contains(String(field(0..<3))),
              let month = monthNames.firstIndex(of: String(field(4..<7))),
              let day = number(dayField), let year = number(field(20..<24)) else { return nil }
        return civilSeconds(year: year, month: month + 1, day: day, time: field(11..<19))
    }

    private static func civilSeconds(year: Int, month: Int, day: Int, time: Substring) -> Int64? {
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
              let hour = number(clock[0]), let minute = number(clock[1]), let second = number(clock[2]),
              hour < 24, minute < 60, second <= 60,
              day >= 1, day <= daysInMonth(year: year, month: month) else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    private static func number(_ digits: Substring) -> Int? {
        guard !digits.isEmpty, digits.utf8.allSatisfy(isDigit) else { return nil }
        return Int(digits)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    private static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        a >= 0 ? a / b : (a - b + 1) / b
    }
}

extension WallClock {
    /// Appends `iso8601(millis:)` (`2026-11-29T15:04:05Z`) as bytes, computed from the day count
    /// alone: no `gmtime_r` (which takes glibc's time-zone lock even for UTC) and no `String`,
    /// since every stored request's `202` carries one.
    package static func appendISO8601(millis: Int64, to out: inout [UInt8]) {
        let (year, month, day, secondOfDay) = utcFields(millis: millis)
        // Four-digit years only; any other goes the long way, so the text stays the same.
        guard (0...9999).contains(year) else {
            out.append(contentsOf: iso8601(millis: millis).utf8)
            return
        }
        func two(_ value: Int) {
            out.append(UInt8(truncatingIfNeeded: 0x30 + value / 10))
            out.append(UInt8(truncatingIfNeeded: 0x30 + value % 10))
        }
        two(Int(year / 100))
        two(Int(year % 100))
        out.append(UInt8(ascii: "-"))
        two(month)
        out.append(UInt8(ascii: "-"))
        two(day)
        out.append(UInt8(ascii: "T"))
        two(secondOfDay / 3600)
        out.append(UInt8(ascii: ":"))
        two(secondOfDay / 60 % 60)
        out.append(UInt8(ascii: ":"))
        two(secondOfDay % 60)
        out.append(UInt8(ascii: "Z"))
    }

    /// The bytes `appendISO8601(millis:to:)` appends: 20 for any year of four digits.
    package static func iso8601ByteCount(millis: Int64) -> Int {
        (0...9999).contains(utcFields(millis: millis).year) ? 20 : iso8601(millis: millis).utf8.count
    }

    private static func utcFields(millis: Int64) -> (year: Int64, month: Int, day: Int, secondOfDay: Int) {
        // Floor division, as `timestamp(milliseconds:)` does, so that instants before 1970 fall
        // into the second that contains them.
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let (year, month, day) = civilDate(daysSince1970: days)
        return (year, month, day, Int(seconds - days * 86_400))
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`: eras of 400 years, each exactly 146 097 days long).
    package static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * shiftedMonth + 2) / 5 + 1)
        let month = Int(shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9)
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

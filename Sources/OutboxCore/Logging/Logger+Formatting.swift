import Glibc

extension Logger {
    /// The text of one log line, without newline.
    static func line(milliseconds: Int64, level: LogLevel, event: String, fields: KeyValuePairs<String, String>) -> String {
        var line = timestamp(milliseconds: milliseconds)
        line += " "
        line += level.rawValue
        line += " "
        line += bareWord(event)
        for (key, value) in fields {
            line += " "
            line += bareWord(key)
            line += "="
            line += fieldValue(value)
        }
        return line
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` in UTC (RFC 3339), milliseconds truncated.
    static func timestamp(milliseconds: Int64) -> String {
        // Floor division, so instants before 1970 still get a millisecond part in 0...999.
        var seconds = milliseconds / 1000
        var millis = milliseconds % 1000
        if millis < 0 {
            seconds -= 1
            millis += 1000
        }
        var time = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return "0000-00-00T00:00:00.000Z" }
        return "\(padded(Int(parts.tm_year) + 1900, 4))-\(padded(Int(parts.tm_mon) + 1, 2))-\(padded(Int(parts.tm_mday), 2))"
            + "T\(padded(Int(parts.tm_hour), 2)):\(padded(Int(parts.tm_min), 2)):\(padded(Int(parts.tm_sec), 2))"
            + ".\(padded(Int(millis), 3))Z"
    }

    /// A value as written after `key=`: bare when unambiguous, else quoted and escaped.
    static func fieldValue(_ value: String) -> String {
        guard value.isEmpty || value.unicodeScalars.contains(where: needsQuoting) else { return value }
        return JSONValue.quoted(value, alsoEscape: isEscaped)
    }

    /// Event names and keys are chosen by code, not users, but a stray space must still not
    /// shift the fields of the line, so unsafe characters become `_`.
    static func bareWord(_ word: String) -> String {
        guard !word.isEmpty else { return "_" }
        guard word.unicodeScalars.contains(where: needsQuoting) else { return word }
        var safe = ""
        for scalar in word.unicodeScalars {
            if needsQuoting(scalar) { safe += "_" } else { safe.unicodeScalars.append(scalar) }
        }
        return safe
    }

    private static func needsQuoting(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\"" || scalar == "=" || scalar == "\\" || scalar.properties.isWhitespace || isEscaped(scalar)
    }

    /// C0 and C1 controls, DEL, and the Unicode line and paragraph separators: anything that
    /// could move the cursor or split a line in a terminal or a log collector.
    private static func isEscaped(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    private static func padded(_ number: Int, _ width: Int) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}

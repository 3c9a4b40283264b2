import OutboxModel

extension Logger {
    /// The text of one log line, without newline.
    static func line(milliseconds: Int64, level: LogLevel, event: String, fields: KeyValuePairs<String, String>) -> String {
        var line = WallClock.timestamp(milliseconds: milliseconds)
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

    /// A value as written after `key=`: bare when unambiguous, else quoted and escaped.
    static func fieldValue(_ value: String) -> String {
        guard value.isEmpty || value.unicodeScalars.contains(where: needsQuoting) else { return value }
        return JSON.quoted(value, alsoEscape: isEscaped)
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
}

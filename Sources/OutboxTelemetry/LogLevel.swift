/// How severe a log event is; a logger set to one level emits that level and every more
/// severe one (`debug` < `info` < `warn` < `error`). The raw values are the spellings used by
/// `--log-level`, the `logLevel` config key and the level column of each log line.
public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    case debug, info, warn, error

    // Declaration order is severity order; CaseIterable keeps the two from drifting apart.
    private var severity: Int {
        switch self {
        case .debug: 0
        case .info: 1
        case .warn: 2
        case .error: 3
        }
    }

    /// Orders levels by severity, `debug` lowest.
    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
        lhs.severity < rhs.severity
    }
}

import Glibc
import OutboxModel
import Synchronization

/// One line per event on stderr: `2026-11-29T16:10:26.123Z info listening address=127.0.0.1:8080`
/// — UTC timestamp with ms, level, event name, then key=value pairs in the given order; values
/// with spaces, quotes, `=` or control chars are quoted with Swift/JSON-like escaping. Thread safe
/// (lines from several threads never interleave: one write(2) per line). Cheap when disabled.
///
/// Keys and event names are written as they are, with any space, `=`, `"` or control
/// character replaced by `_`, so a line always splits back into the same fields. The sink gets
/// the line without its newline; `standardError` adds it.
public final class Logger: Sendable {
    /// The least severe level this logger writes.
    public let level: LogLevel
    private let sink: @Sendable (String) -> Void
    private let clock: @Sendable () -> Int64

    /// A logger writing events at `level` and above to `sink`, stamped with the system clock.
    public init(level: LogLevel, sink: @escaping @Sendable (String) -> Void = Logger.standardError) {
        self.level = level
        self.sink = sink
        self.clock = WallClock.millis
    }

    /// A logger whose timestamps come from `clock`, in milliseconds since 1970-01-01T00:00:00Z;
    /// for tests that compare whole lines.
    public init(level: LogLevel, clock: @escaping @Sendable () -> Int64, sink: @escaping @Sendable (String) -> Void) {
        self.level = level
        self.sink = sink
        self.clock = clock
    }

    /// Writes each line plus "\n" to standard error (file descriptor 2); see `fileDescriptorSink`.
    public static let standardError: @Sendable (String) -> Void = fileDescriptorSink(2)

    /// A sink writing each line plus "\n" to `fd` in one `write(2)`; one process-wide lock keeps
    /// lines whole even past `PIPE_BUF` or after a short write. Write errors are dropped:
    /// logging must never take the proxy down. The caller keeps owning `fd`.
    public static func fileDescriptorSink(_ fd: Int32) -> @Sendable (String) -> Void {
        { line in
            var bytes = Array(line.utf8)
            bytes.append(0x0A)
            writeLock.withLock { _ in
                bytes.withUnsafeBytes { buffer in
                    var offset = 0
                    while offset < buffer.count {
                        let written = write(fd, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
                        if written > 0 {
                            offset += written
                        } else if written < 0, errno == EINTR {
                            continue
                        } else {
                            return
                        }
                    }
                }
            }
        }
    }

    private static let writeLock = Mutex(())

    /// True when an event at `level` would be written; check it before building costly fields.
    public func isEnabled(_ level: LogLevel) -> Bool {
        level >= self.level
    }

    /// Writes one line for `event` with `fields` in order, if `level` is enabled.
    public func log(_ level: LogLevel, _ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
        guard isEnabled(level) else { return }
        sink(Logger.line(milliseconds: clock(), level: level, event: event, fields: fields))
    }

    /// `log(.debug, event, fields)`.
    public func debug(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
        log(.debug, event, fields)
    }

    /// `log(.info, event, fields)`.
    public func info(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
        log(.info, event, fields)
    }

    /// `log(.warn, event, fields)`.
    public func warn(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
        log(.warn, event, fields)
    }

    /// `log(.error, event, fields)`.
    public func error(_ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
        log(.error, event, fields)
    }
}

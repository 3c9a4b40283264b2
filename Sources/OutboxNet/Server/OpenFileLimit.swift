import Glibc
import OutboxModel

/// The process's open-file limit (`RLIMIT_NOFILE`): the soft limit is the one `EMFILE`
/// enforces, the hard one how far an unprivileged process may raise it.
///
/// Every client connection, upstream connection and storage file is a descriptor, and many
/// systems still start services with a soft limit of 1024 (systemd's default, for `select()`'s
/// sake) under a far higher hard one. Outbox uses epoll and poll only, never `select()`, so at
/// start it raises the soft limit to the hard one (SPEC §6), as Go's runtime does for every
/// program since Go 1.19.
package struct OpenFileLimit: Sendable, Equatable {
    package var soft: UInt64
    package var hard: UInt64

    /// `RLIM_INFINITY`: no limit.
    package static let unlimited = UInt64.max

    package init(soft: UInt64, hard: UInt64) {
        self.soft = soft
        self.hard = hard
    }

    /// The limit now; nil if it cannot be read.
    package static func current() -> OpenFileLimit? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return OpenFileLimit(soft: UInt64(limit.rlim_cur), hard: UInt64(limit.rlim_max))
    }

    /// The soft limit to ask for: the hard limit, at most `ceiling` (the kernel's `fs.nr_open`:
    /// Linux refuses more, and a hard limit of `unlimited` is more); never below `soft`.
    package func raisedSoft(ceiling: UInt64) -> UInt64 {
        max(soft, min(hard, ceiling))
    }

    /// The kernel's most descriptors for one process (`/proc/sys/fs/nr_open`), 1 048 576 (its
    /// default) when it cannot be read.
    static func kernelCeiling() -> UInt64 {
        let text = (try? SmallFile.read("/proc/sys/fs/nr_open", atMost: 64)).map { String(decoding: $0, as: UTF8.self) }
        return text.flatMap { UInt64($0.filter { !$0.isWhitespace }) } ?? 1 << 20
    }

    /// Raises the soft limit to the hard one (see ``raisedSoft(ceiling:)``): the limits before and
    /// after, or the failed call.
    package static func raiseSoftToHard() -> Result<(before: OpenFileLimit, after: OpenFileLimit), SystemError> {
        guard let before = current() else { return .failure(SystemError("getrlimit")) }
        var raised = before
        raised.soft = before.raisedSoft(ceiling: kernelCeiling())
        if raised.soft != before.soft {
            var limit = rlimit(rlim_cur: rlim_t(raised.soft), rlim_max: rlim_t(before.hard))
            guard setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
                return .failure(SystemError("setrlimit"))
            }
        }
        return .success((before, current() ?? raised))
    }

    /// `soft` for a log line: the number, or `unlimited`.
    package var softText: String { Self.text(soft) }
    /// `hard` for a log line: the number, or `unlimited`.
    package var hardText: String { Self.text(hard) }

    private static func text(_ value: UInt64) -> String {
        value == unlimited ? "unlimited" : String(value)
    }
}

import Glibc
import OutboxModel
import Synchronization

/// A few descriptors Outbox holds while it has enough, and lets go the moment one of its socket
/// calls finds none (SPEC §6). The process then still has that many for what must not fail,
/// while Outbox opens no socket of its own (``Sockets/accept(_:)`` and
/// ``Sockets/connect(to:)`` answer as if out of descriptors) until it can take them back.
///
/// What must not fail: libdispatch's thread-pool monitor, which opens `/proc/<tid>/stat` every
/// second while a global queue has work waiting and aborts the whole process (SIGILL) when it
/// cannot (seen here: a reachability probe's Dispatch work during exhaustion killed Outbox
/// within a second); and a storage file or a name lookup. Servers use a reserve descriptor to
/// answer a client they cannot afford; this one protects the process instead.
package final class DescriptorReserve: Sendable {
    /// The process's one reserve: the open-file limit is the process's.
    package static let process = DescriptorReserve()

    private struct State {
        /// The placeholders (`/dev/null`), held while not short.
        var held: [Int32] = []
        /// How many to hold: set by `fill`; 0 before.
        var size = 0
        /// When `retake` last tried (monotonic ns), so that a burst of refused connects does not
        /// open and close files for each.
        var lastTry: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Read on every accept and upstream connect: lock-free.
    private let short = Atomic<Bool>(false)
    /// The most a reserve holds; a quarter of a small limit at most (``fill()``).
    package static let largest = 16
    /// How often a refused socket call may try to take the reserve back.
    static let retryInterval: UInt64 = 50_000_000

    /// Takes the reserve: `largest` descriptors, or an eighth of the soft open-file limit when
    /// that is smaller. Call once at start, after the limit is raised; later calls change nothing.
    package func fill() {
        let limit = OpenFileLimit.current()?.soft ?? 1024
        state.withLock { state in
            guard state.size == 0 else { return }
            state.size = Int(min(UInt64(Self.largest), limit / 8))
            state.held = Self.open(state.size) ?? []
        }
    }

    /// True while the reserve is let go: Outbox's own sockets must wait.
    package var isShort: Bool { short.load(ordering: .acquiring) }

    /// A socket call found no descriptor: let the reserve go, so the rest of the process has some.
    package func release() {
        short.store(true, ordering: .releasing)
        let placeholders = state.withLock { state -> [Int32] in
            let held = state.held
            state.held = []
            return held
        }
        for fd in placeholders { close(fd) }
    }

    /// After a socket call took a descriptor: when it was the process's last, lets the reserve
    /// go at once. Otherwise the process would have none until Outbox's next socket call fails,
    /// which may come only after the loop has served other events: a window in which
    /// libdispatch's monitor, opening its `/proc` file, aborts the process. One `fcntl` and one
    /// `close` per new socket.
    package func tookOne() {
        guard !isShort else { return }
        let last = state.withLock { state -> Bool in
            guard let placeholder = state.held.first else { return false }
            let probe = fcntl(placeholder, F_DUPFD_CLOEXEC, 0)
            guard probe >= 0 else { return errno == EMFILE || errno == ENFILE }
            close(probe)
            return false
        }
        if last { release() }
    }

    /// While short: tries to take the reserve back, with one descriptor to spare (so the next
    /// socket call does not take the process's last one), at most every `retryInterval`.
    /// True when Outbox may open sockets again.
    package func retake() -> Bool {
        guard isShort else { return true }
        let now = MonotonicClock.nanos()
        return state.withLock { state -> Bool in
            guard short.load(ordering: .acquiring) else { return true }
            guard now &- state.lastTry >= Self.retryInterval else { return false }
            state.lastTry = now
            guard var taken = Self.open(state.size + 1) else { return false }
            if let spare = taken.popLast() { close(spare) }
            state.held = taken
            short.store(false, ordering: .releasing)
            return true
        }
    }

    /// `count` descriptors on `/dev/null`, or nil (none kept) when the process has fewer free.
    private static func open(_ count: Int) -> [Int32]? {
        var fds: [Int32] = []
        fds.reserveCapacity(count)
        for _ in 0..<count {
            let fd = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                for taken in fds { close(taken) }
                return nil
            }
            fds.append(fd)
        }
        return fds
    }
}

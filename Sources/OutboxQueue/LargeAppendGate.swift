import Dispatch
import Synchronization

/// Lets the `created` records of large bodies into the log a few at a time.
///
/// An append encodes its whole frame into the log's shared buffer before the writer takes it,
/// so forty 8 MiB stores arriving together (an origin answering 503 to forty uploads at once)
/// would put 320 MiB into that buffer, spilled bodies included: the memory the body budget
/// just saved. Bodies of ``threshold`` bytes or more therefore wait here, first come first
/// served, while earlier ones whose records are not yet on disk hold ``limit`` bytes; one is
/// always let in when nothing else is, however large. A waiting request holds only what it
/// already held (a spill file, or its bytes within `limits.bodyMemoryBytes`). Smaller bodies
/// never wait: one comparison on their path.
final class LargeAppendGate: Sendable {
    /// Bodies from this size on pass the gate.
    static let threshold = 1 << 20

    private struct Waiting {
        var bytes: Int
        var start: @Sendable () -> Void
    }

    private struct State {
        var inFlight = 0
        /// In arrival order. Taken from the front: at most one request per client connection
        /// waits, so the shift is short, and a started one is not kept alive by the array.
        var waiting: [Waiting] = []
    }

    let limit: Int
    private let state = Mutex(State())
    /// Where a waiting append starts once a finished one makes room: not on the log's writer
    /// thread, which reports the finish and whose next batch would wait for the encoding.
    private let starter = DispatchQueue(label: "outbox.large-appends")

    init(limit: Int = 8 << 20) {
        self.limit = limit
    }

    /// Runs `start` now when `bytes` fit beside what is in flight, else once they do. Every
    /// admitted append must be matched by one ``release(_:)`` with the same `bytes`.
    func admit(_ bytes: Int, _ start: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.waiting.isEmpty, fits(bytes, state.inFlight) {
                state.inFlight += bytes
                return true
            }
            state.waiting.append(Waiting(bytes: bytes, start: start))
            return false
        }
        if now { start() }
    }

    /// An admitted append's record is on disk (or failed): lets in what now fits.
    func release(_ bytes: Int) {
        let admitted = state.withLock { state -> [Waiting] in
            state.inFlight -= bytes
            var admitted: [Waiting] = []
            while let first = state.waiting.first, fits(first.bytes, state.inFlight) {
                state.inFlight += first.bytes
                admitted.append(state.waiting.removeFirst())
            }
            return admitted
        }
        for waiting in admitted { starter.async(execute: waiting.start) }
    }

    /// Bytes admitted whose appends have not finished, and how many wait (for tests).
    var load: (inFlight: Int, waiting: Int) {
        state.withLock { ($0.inFlight, $0.waiting.count) }
    }

    private func fits(_ bytes: Int, _ inFlight: Int) -> Bool {
        inFlight == 0 || inFlight + bytes <= limit
    }
}

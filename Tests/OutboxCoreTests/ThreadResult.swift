import Foundation
import Synchronization

/// Blocking work on a thread of its own, started at once, whose result is awaited later.
///
/// A test's peer that blocks in `poll` (a hand-written origin) must run from the moment the
/// test begins, whatever Swift's cooperative pool is doing: a child task (`async let`) that only
/// starts the thread waits its turn on that pool, which a whole `swift test` keeps busy with
/// other tests, so the peer could start after the timeout it was meant to beat.
final class ThreadResult<Value: Sendable>: Sendable {
    private enum State {
        case running
        case waiting(CheckedContinuation<Value, Never>)
        case finished(Value)
    }

    private let state = Mutex<State>(.running)

    init(_ work: @escaping @Sendable () -> Value) {
        Thread { [self] in finish(work()) }.start()
    }

    /// The work's result, once it has returned.
    var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                let ready: Value? = state.withLock { state in
                    if case .finished(let value) = state { return value }
                    state = .waiting(continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }

    private func finish(_ value: Value) {
        let waiter: CheckedContinuation<Value, Never>? = state.withLock { state in
            defer { state = .finished(value) }
            if case .waiting(let continuation) = state { return continuation }
            return nil
        }
        waiter?.resume(returning: value)
    }
}

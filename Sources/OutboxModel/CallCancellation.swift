import Synchronization

/// A one-shot cancel for one upstream call in flight, settable from any thread: the replayer's
/// attempt deadline, an admin delete of the operation and a clean stop all end an attempt
/// through the same object, and the transport that carries the call registers what ending it
/// means (closing its connection, on its loop). The first `cancel` wins; later ones change
/// nothing.
public final class CallCancellation: Sendable {
    /// Why a call was cancelled: the caller reads it back once the call returned.
    public enum Reason: Sendable, Equatable {
        /// The attempt's total deadline passed (`replay.attemptTimeoutSeconds`).
        case deadline(seconds: Double)
        /// Its operation was removed (delete, bulk delete, prune): it must never be sent.
        case removed
        /// The process is stopping and the attempt outlived the shutdown bound.
        case stopping
    }

    private struct State {
        var reason: Reason?
        var handler: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    /// A call not cancelled yet.
    public init() {}

    /// Why it was cancelled; nil while it was not.
    public var reason: Reason? { state.withLock { $0.reason } }

    public var isCancelled: Bool { reason != nil }

    /// Cancels the call (when it was not already) and runs the transport's handler, on the
    /// caller's thread: the handler only hands the work to the call's loop.
    public func cancel(_ reason: Reason) {
        let handler = state.withLock { state -> (@Sendable () -> Void)? in
            guard state.reason == nil else { return nil }
            state.reason = reason
            defer { state.handler = nil }
            return state.handler
        }
        handler?()
    }

    /// Sets what cancelling does; false (and `handler` is dropped) when the call was cancelled
    /// already, so the transport starts nothing.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            guard state.reason == nil else { return false }
            state.handler = handler
            return true
        }
    }

    /// Drops the handler once the call ended: what it holds (the call's collector) goes now.
    public func callEnded() {
        state.withLock { $0.handler = nil }
    }
}

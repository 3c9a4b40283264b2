/// A one-shot barrier: the test upstream holds a scripted response until the test opens it,
/// which lets a test act (send a signal, check a timeout) while an exchange is in flight.
final class Gate: Sendable {
    private let state = WaitableState(false)

    /// Whether `open()` was called.
    var isOpen: Bool { state.value }

    /// Creates a closed gate.
    init() {}

    /// Releases everything waiting now and everything that waits later.
    func open() {
        state.update { $0 = true }
    }

    /// Blocks the calling harness thread until the gate opens; false when `timeout` passes first.
    func waitBlocking(timeout: Duration) -> Bool {
        state.waitBlocking(timeout: timeout) { $0 ? true : nil } ?? false
    }
}

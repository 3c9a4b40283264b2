import Glibc

/// SIGTERM and SIGINT taken synchronously with `sigwait` on the main thread.
///
/// Blocking them before any thread starts means every thread inherits the mask, so the
/// signal stays pending until the main thread asks for it: no async-signal-safety rules, no
/// handler racing the event loops.
public enum TerminationSignals {
    /// Call before creating threads (before `ProxyServer.start()`).
    public static func block() {
        var set = signals()
        pthread_sigmask(SIG_BLOCK, &set, nil)
        // A write to a closed socket must be an EPIPE error, not the death of the process.
        signal(SIGPIPE, SIG_IGN)
    }

    /// Waits for SIGTERM or SIGINT and returns its number.
    public static func wait() -> Int32 {
        var set = signals()
        var received: Int32 = 0
        while sigwait(&set, &received) != 0 {}
        return received
    }

    private static func signals() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        return set
    }
}

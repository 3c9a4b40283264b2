import Glibc

/// Something a thread wakes after handing it work: an event loop, through its eventfd.
package protocol WakeUpTarget: AnyObject, Sendable {
    func wakeUp()
}

/// Lets a thread that hands out a burst of jobs (the log's writer completing a group commit,
/// each completion queued on the event loop of its request) wake each receiver once, after the
/// burst, instead of whenever a receiver's job list happens to be empty.
///
/// A loop woken by the first completion of a batch took the jobs queued so far, went back to
/// sleep while the writer went on completing, and was woken again: about 3.3 eventfd writes
/// per batch with two loops, each an `epoll_wait` return and a context switch on a busy CPU.
/// Inside ``run(_:)`` the receivers ask ``deferWakeUp(_:)`` instead and are woken at its end.
/// Thread-local, so other threads' wake-ups are never delayed.
package enum WakeUpBatch {
    private final class Collector {
        var targets: [WakeUpTarget] = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create")
        return key
    }()

    /// Runs `body`; the wake-ups it defers happen once `body` returns, one per target.
    package static func run(_ body: () -> Void) {
        let collector = Collector()
        let unmanaged = Unmanaged.passRetained(collector)
        // A batch inside a batch wakes its own targets at its end; the outer one then goes on.
        let outer = pthread_getspecific(key)
        pthread_setspecific(key, unmanaged.toOpaque())
        body()
        pthread_setspecific(key, outer)
        unmanaged.release()
        for target in collector.targets { target.wakeUp() }
    }

    /// Inside ``run(_:)`` on this thread: remembers `target` and returns true (the caller skips
    /// its wake-up). Elsewhere: returns false.
    package static func deferWakeUp(_ target: WakeUpTarget) -> Bool {
        guard let raw = pthread_getspecific(key) else { return false }
        let collector = Unmanaged<Collector>.fromOpaque(raw).takeUnretainedValue()
        if !collector.targets.contains(where: { $0 === target }) { collector.targets.append(target) }
        return true
    }
}

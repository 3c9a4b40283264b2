import OutboxNet
import OutboxTelemetry

/// Stops every listener for a moment when the process runs out of descriptors and starts them
/// again by itself (SPEC §6): the thin shell around ``AcceptBackoff``, on loop 0, which owns
/// the listeners.
///
/// The shortage is the process's, not one socket's, so when `accept4` on one listener fails
/// for lack of descriptors, all of them pause (nginx disables every accept event). Meanwhile
/// new connections wait in the kernel's backlog, and connections already open are served as
/// usual; what needs a new descriptor there gets `503 local_resources_exhausted`. The end of a
/// pause is seen by the loop's deadline sweep, so a pause lasts up to one sweep interval
/// (at most 250 ms) longer than the schedule says. The descriptors freed meanwhile for the rest
/// of the process are the ``DescriptorReserve``'s, which the next accept takes back first.
final class AcceptGate: DeadlineTracked {
    private unowned(unsafe) let loop: EventLoop  // the gate belongs to loop 0
    private let logger: Logger
    private var backoff = AcceptBackoff()
    private var listeners: [Listener] = []

    init(loop: EventLoop, logger: Logger) {
        self.loop = loop
        self.logger = logger
    }

    /// Puts `listener` under this gate (loop thread only).
    func add(_ listener: Listener) {
        listeners.append(listener)
    }

    /// A listener's accept failed for lack of descriptors: every listener stops for the next
    /// pause; the first shortage of an episode is logged.
    func exhausted(_ error: SystemError, on role: ListenerRole) {
        let now = loop.now
        let pause = backoff.exhausted(now: now)
        for listener in listeners { listener.pause() }
        loop.track(self)
        guard pause.startsEpisode else { return }
        logger.warn("server_fd_exhausted", ["listener": String(describing: role), "error": error.description,
                                             "openFilesLimit": OpenFileLimit.current()?.softText ?? "-",
                                             "pauseMs": String((pause.until - now) / 1_000_000)])
    }

    /// A connection was accepted: an episode in progress is over.
    func accepted() {
        guard backoff.episodeStartedAt != nil, let lasted = backoff.accepted(now: loop.now) else { return }
        logger.info("server_fd_recovered", ["ms": String(lasted / 1_000_000)])
    }

    func checkDeadlines(now: UInt64) {
        guard backoff.resumes(now: now) else { return }
        loop.untrack(self)
        for listener in listeners { listener.resume() }
    }
}

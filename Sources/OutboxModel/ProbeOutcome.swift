/// What one reachability probe found out about an origin.
///
/// A probe that Outbox could not even start (no descriptor for its socket) says nothing about
/// the origin: it is neither an answer nor a failure, and must never mark the origin offline
/// (SPEC §6: Outbox's own lack of descriptors is not an unreachable origin).
public enum ProbeOutcome: Sendable, Equatable {
    /// The origin accepted the connection (and the handshake, or answered `GET probePath`
    /// below 500).
    case answered
    /// The origin refused, timed out, failed the handshake or answered 500 or above.
    case unanswered
    /// Outbox could not probe (the reason, such as `socket: Too many open files`); try again later.
    case notProbed(String)

    /// `answered` for true, `unanswered` for false: for probes that only know yes or no.
    public init(answered: Bool) {
        self = answered ? .answered : .unanswered
    }
}

import OutboxModel

/// Whom the queue wakes when a lane may have work: the replayer, wired in by the service. The
/// queue knows only this seam, never the replayer, so the replay layer can sit above it.
package protocol LaneWaker: Sendable {
    /// Starts every lane that has work (once, after recovery).
    func startAll() async
    /// Wakes `origin`'s lanes: a new operation, the origin back online, a state change.
    func kick(_ origin: Origin) async
    /// Wakes every lane with work or running (flush, connectivity back to auto).
    func kickAll() async
}

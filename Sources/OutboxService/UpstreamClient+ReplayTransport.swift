import OutboxNet
import OutboxReplay

/// The replayer sends through the server's event loops; it knows only its transport seam, so
/// the replay layer never imports the network layer.
extension UpstreamClient: ReplayTransport {}

import OutboxHTTP
import OutboxModel
import OutboxNet
import OutboxReplay

/// The replayer sends through the server's event loops; it knows only its transport seam, so
/// the replay layer never imports the network layer.
extension UpstreamClient: ReplayTransport {
    package func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8],
                      maxResponseBytes: Int) async -> Result<CollectedResponse, UpstreamError> {
        await send(to: origin, head: head, body: body, maxResponseBytes: maxResponseBytes, purpose: .replay)
    }

    package func send(to origin: Origin, head: HTTPRequestHead, body: [UInt8], maxResponseBytes: Int,
                      cancellation: CallCancellation,
                      whileInFlight: @Sendable () -> Void) async -> Result<CollectedResponse, UpstreamError> {
        await send(to: origin, head: head, body: body, maxResponseBytes: maxResponseBytes, purpose: .replay,
                   cancellation: cancellation, whileInFlight: whileInFlight)
    }
}

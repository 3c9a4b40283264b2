import OutboxModel

extension UpstreamError {
    /// The failure of opening a connection to an origin (`socket`, `connect`): Outbox's own lack
    /// of descriptors is `localResourcesExhausted`, which counts nobody unreachable; anything
    /// else is `connectFailed`. The one place that tells the two apart, for every connect.
    package static func connecting(_ error: SystemError) -> UpstreamError {
        error.isResourceShortage ? .localResourcesExhausted(error.description) : .connectFailed(error.description)
    }
}

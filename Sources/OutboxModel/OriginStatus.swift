/// One origin as `/admin/status` shows it.
public struct OriginStatus: Sendable, Equatable {
    public var origin: Origin
    public var online: Bool
    public var lastError: String?
    /// Milliseconds since the epoch; nil while online.
    public var nextProbeAt: Int64?
    /// The origin's last answer to a replay was a status in `replay.authStatuses`: its writes
    /// wait for fresh credentials (SPEC §10).
    public var authRequired: Bool

    package init(origin: Origin, online: Bool, lastError: String?, nextProbeAt: Int64?, authRequired: Bool = false) {
        self.origin = origin
        self.online = online
        self.lastError = lastError
        self.nextProbeAt = nextProbeAt
        self.authRequired = authRequired
    }
}

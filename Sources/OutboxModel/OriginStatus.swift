/// One origin as `/admin/status` shows it.
public struct OriginStatus: Sendable, Equatable {
    public var origin: Origin
    public var online: Bool
    public var lastError: String?
    /// Milliseconds since the epoch; nil while online.
    public var nextProbeAt: Int64?

    package init(origin: Origin, online: Bool, lastError: String?, nextProbeAt: Int64?) {
        self.origin = origin
        self.online = online
        self.lastError = lastError
        self.nextProbeAt = nextProbeAt
    }
}

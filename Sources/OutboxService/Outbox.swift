/// Outbox as a whole: the HTTP/1.1 codec, the event-driven server, the upstream client and
/// the proxy rules that join them. The `outbox` executable only wires these together.
public enum Outbox {
    /// The version printed by `outbox --version` and sent nowhere else.
    public static let version = "0.1.0"
}

/// Outbox as a whole. Its layers (codec, model, storage, queue, network, replay, admin, proxy)
/// are assembled by `OutboxService`; the `outbox` executable only starts that.
public enum Outbox {
    /// The version printed by `outbox --version` and sent nowhere else.
    public static let version = "0.1.0"
}

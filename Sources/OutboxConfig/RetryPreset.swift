/// A named set of backoff settings, so one word in a config picks a whole policy. A config's
/// `retry.preset` supplies `maxRetries`, `baseDelaySeconds`, `multiplier`, `maxDelaySeconds`
/// and `jitter`; keys written next to it override the preset's values one by one.
public enum RetryPreset: String, Sendable, CaseIterable {
    /// 5 retries, 1 s, ×2, capped at 60 s, jittered.
    case `default`
    /// 10 retries, 0.5 s, ×1.5, capped at 30 s, jittered.
    case aggressive
    /// 3 retries, 5 s, ×3, capped at 120 s, jittered.
    case conservative
    /// 5 retries every 5 s, no jitter.
    case linear
    /// 3 retries every 0.1 s, no jitter.
    case immediate
}

extension OutboxConfig.Retry {
    /// The preset's backoff values; `retryableStatuses` keeps its default, presets don't set it.
    public init(preset: RetryPreset) {
        self.init()
        self.preset = preset
        switch preset {
        case .default:
            break
        case .aggressive:
            (maxRetries, baseDelaySeconds, multiplier, maxDelaySeconds, jitter) = (10, 0.5, 1.5, 30, true)
        case .conservative:
            (maxRetries, baseDelaySeconds, multiplier, maxDelaySeconds, jitter) = (3, 5, 3, 120, true)
        case .linear:
            // Linear means a constant interval: the cap equals it, so every delay is exactly 5 s.
            (maxRetries, baseDelaySeconds, multiplier, maxDelaySeconds, jitter) = (5, 5, 1, 5, false)
        case .immediate:
            (maxRetries, baseDelaySeconds, multiplier, maxDelaySeconds, jitter) = (3, 0.1, 1, 0.1, false)
        }
    }
}

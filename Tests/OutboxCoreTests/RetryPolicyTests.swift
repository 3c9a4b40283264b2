@testable import OutboxConfig
@testable import OutboxReplay
import Testing

@Suite("Retry policy: presets, backoff and jitter")
struct RetryPolicyTests {
    @Test("each preset has its documented numbers", arguments: [
        (RetryPreset.default, 5, 1.0, 2.0, 60.0, true),
        (.aggressive, 10, 0.5, 1.5, 30.0, true),
        (.conservative, 3, 5.0, 3.0, 120.0, true),
        (.linear, 5, 5.0, 1.0, 5.0, false),
        (.immediate, 3, 0.1, 1.0, 0.1, false),
    ])
    func presetMatchesSpec(preset: RetryPreset, retries: Int, base: Double, multiplier: Double, cap: Double, jitter: Bool) {
        let policy = RetryPolicy(OutboxConfig.Retry(preset: preset))
        #expect(policy.maxRetries == retries)
        #expect(policy.baseDelaySeconds == base)
        #expect(policy.multiplier == multiplier)
        #expect(policy.maxDelaySeconds == cap)
        #expect(policy.jitter == jitter)
        #expect(policy.retryableStatuses == [408, 425, 429, 500, 502, 503, 504])
    }

    @Test("nominal delays grow by the multiplier and stop at the cap", arguments: [
        (RetryPreset.default, [1.0, 2, 4, 8, 16, 32, 60, 60]),
        (.aggressive, [0.5, 0.75, 1.125, 1.6875]),
        (.conservative, [5.0, 15, 45, 120, 120]),
        (.linear, [5.0, 5, 5, 5, 5]),
        (.immediate, [0.1, 0.1, 0.1]),
    ])
    func nominalDelaysPerPreset(preset: RetryPreset, expected: [Double]) {
        let policy = RetryPolicy(OutboxConfig.Retry(preset: preset))
        let delays = (1...expected.count).map { policy.nominalDelay(beforeRetry: $0) }
        for (delay, want) in zip(delays, expected) {
            #expect(abs(delay - want) < 1e-9, "\(preset): \(delays) vs \(expected)")
        }
    }

    @Test("without jitter the delay is exactly the nominal delay")
    func unjitteredDelayIsNominal() {
        var random = ReplayTestRandom(seed: 1)
        let policy = RetryPolicy(OutboxConfig.Retry(preset: .linear))
        #expect(policy.delay(beforeRetry: 3, random: &random) == 5)
    }

    @Test("jittered delays stay within 50–150 % of nominal and actually spread", arguments: RetryPreset.allCases)
    func jitterStaysWithinBounds(preset: RetryPreset) {
        var config = OutboxConfig.Retry(preset: preset)
        config.jitter = true
        let policy = RetryPolicy(config)
        var random = ReplayTestRandom(seed: 42)
        for retry in 1...8 {
            let nominal = policy.nominalDelay(beforeRetry: retry)
            let samples = (0..<500).map { _ in policy.delay(beforeRetry: retry, random: &random) }
            #expect(samples.allSatisfy { $0 >= nominal * 0.5 && $0 <= nominal * 1.5 })
            #expect(samples.contains { $0 < nominal * 0.7 })
            #expect(samples.contains { $0 > nominal * 1.3 })
        }
    }

    @Test("huge retry numbers give the cap instead of overflowing")
    func hugeRetryNumberIsCapped() {
        let policy = RetryPolicy(OutboxConfig.Retry())
        #expect(policy.nominalDelay(beforeRetry: 100_000) == 60)
        #expect(policy.nominalDelay(beforeRetry: 0) == 1)
    }

    @Test("maxRetries counts retries after the first attempt")
    func maxRetriesCountsRetries() {
        var config = OutboxConfig.Retry()
        config.maxRetries = 2
        let policy = RetryPolicy(config)
        #expect(policy.allowsRetry(afterRetries: 0))
        #expect(policy.allowsRetry(afterRetries: 1))
        #expect(!policy.allowsRetry(afterRetries: 2))
        config.maxRetries = 0
        #expect(!RetryPolicy(config).allowsRetry(afterRetries: 0))
    }
}

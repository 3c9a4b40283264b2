import Synchronization

/// An atomic in a class, so that counters can live in an array (`Atomic` cannot be copied).
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    func add(_ amount: Int) { value.add(amount, ordering: .relaxed) }
    func load() -> Int { value.load(ordering: .relaxed) }
}

/// Observations counted by upper bound, for a Prometheus histogram: each observation lands in
/// the first bucket whose bound it does not exceed (or the last, `+Inf`). Bounds are compared
/// in whole microseconds, so recording takes no floating point on a hot path. Writers that
/// must not share cache lines (the event loops) keep one each; a scrape adds them up.
final class Histogram: Sendable {
    /// Upper bounds in seconds, ascending.
    let bounds: [Double]
    private let boundMicros: [Int]
    /// One per bound, then `+Inf`; not cumulative.
    private let counts: [Counter]
    private let sumMicros = Counter()

    init(bounds: [Double]) {
        self.bounds = bounds
        boundMicros = bounds.map { Int(($0 * 1_000_000).rounded()) }
        counts = (0...bounds.count).map { _ in Counter() }
    }

    func observe(micros: Int) {
        var bucket = 0
        while bucket < boundMicros.count && micros > boundMicros[bucket] { bucket += 1 }
        counts[bucket].add(1)
        sumMicros.add(micros)
    }

    /// The `_bucket`, `_sum` and `_count` samples of the histograms in `parts` added up (all
    /// with the same bounds), `_bucket` cumulative as the text format wants it.
    static func samples(_ parts: [Histogram], number: (Double) -> String) -> [(String, String)] {
        guard let bounds = parts.first?.bounds else { return [] }
        var cumulative = 0
        var samples: [(String, String)] = []
        for (index, bound) in bounds.enumerated() {
            cumulative += parts.reduce(0) { $0 + $1.counts[index].load() }
            samples.append(("_bucket{le=\"\(number(bound))\"}", String(cumulative)))
        }
        cumulative += parts.reduce(0) { $0 + $1.counts[bounds.count].load() }
        samples.append(("_bucket{le=\"+Inf\"}", String(cumulative)))
        samples.append(("_sum", number(Double(parts.reduce(0) { $0 + $1.sumMicros.load() }) / 1e6)))
        samples.append(("_count", String(cumulative)))
        return samples
    }
}

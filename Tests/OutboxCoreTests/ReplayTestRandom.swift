import OutboxModel

/// Jitter tests draw from the product's seeded generator, so they are reproducible.
typealias ReplayTestRandom = SeededRandom

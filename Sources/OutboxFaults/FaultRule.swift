import OutboxModel

/// One fault-injection rule: which upstream requests it matches, what failure it stands in
/// for, and how long it lasts. A value parsed once from the admin API's JSON and rendered back
/// the same way; `FaultBook` keeps the counters and the random state that change per request.
package struct FaultRule: Sendable, Equatable {
    /// What the rule does to a request it applies to, each as the real failure would look.
    package enum Action: Sendable, Equatable {
        /// The origin answers `status` (with `Retry-After` and `body` when given).
        case status(Int, retryAfterSeconds: Double?, body: [UInt8])
        /// The connection drops after the request was sent: no response.
        case reset
        /// No response head within `reachability.responseTimeoutSeconds`.
        case timeout
        /// Connecting is refused; the origin's probes fail while the rule is active.
        case offline
        /// Waits, then forwards for real.
        case latency(seconds: Double)

        var name: String {
            switch self {
            case .status: "status"
            case .reset: "reset"
            case .timeout: "timeout"
            case .offline: "offline"
            case .latency: "latency"
            }
        }
    }

    /// Whether a rule applies to requests forwarded at once, replay attempts, or both.
    package enum Scope: String, Sendable, Equatable, CaseIterable {
        case direct, replay, both

        func covers(_ kind: UpstreamRequestKind) -> Bool {
            self == .both || (self == .direct) == (kind == .direct)
        }
    }

    package var id: String
    /// nil matches every origin.
    package var origin: Origin?
    /// Matched exactly (methods are case-sensitive); nil matches every method.
    package var method: String?
    /// Matched against the start of the request target as it goes upstream; nil matches all.
    package var pathPrefix: String?
    package var scope: Scope
    package var action: Action
    /// The rule applies to the first `times` matching requests, then is exhausted.
    package var times: Int?
    /// The chance that a matching request is failed, 0…1.
    package var probability: Double
    /// The random sequence's seed; the same seed and the same requests give the same choices.
    package var seed: UInt64
    /// Whether `seed` was given (rendered back only then).
    package var seedGiven: Bool
    /// The rule ends this long after it was added.
    package var forSeconds: Double?
    /// When it was added, ms since the epoch.
    package var addedAt: Int64

    /// Whether the rule covers a request to `origin` with `method` and `target`.
    func matches(origin: Origin, method: String, target: String, kind: UpstreamRequestKind) -> Bool {
        scope.covers(kind)
            && (self.origin == nil || self.origin == origin)
            && (self.method == nil || self.method == method)
            && (pathPrefix.map { target.utf8.starts(with: $0.utf8) } ?? true)
    }

    func hasEnded(now: Int64) -> Bool {
        forSeconds.map { now >= addedAt + WallClock.milliseconds($0) } ?? false
    }
}

/// The two ways Outbox sends a request upstream.
package enum UpstreamRequestKind: Sendable {
    /// A client's request forwarded at once.
    case direct
    /// A stored operation's delivery attempt.
    case replay
}

import OutboxModel

/// One rule of `replay.credentials` (SPEC §10): which origins it covers, which header fields it
/// supplies when their operations are replayed, and where their values come from. The first
/// rule whose `origin` matches an origin applies to it.
public struct CredentialRule: Sendable, Equatable {
    /// Which origins a rule covers: host patterns as `allowedHosts` writes them (any scheme and
    /// port), or one origin exactly (`https://api.example.com`, scheme, host and port).
    public enum Scope: Sendable, Equatable {
        case hosts(OutboxConfig.HostPatterns)
        case origin(Origin)

        public func covers(_ origin: Origin) -> Bool {
            switch self {
            case .hosts(let patterns): patterns.matches(origin.host)
            case .origin(let exact): exact == origin
            }
        }
    }

    /// Where the values come from.
    public enum Source: String, Sendable, Equatable, CaseIterable {
        /// The newest values a client sent to the origin through Outbox.
        case client
        /// A command's answer (`{"headers": {...}, "expiresAt": "..."}` on stdout).
        case command
    }

    public var scope: Scope
    /// As the config wrote it, for the effective JSON.
    public var originText: String
    /// Header names, lowercased, as they are replaced on the replayed request.
    public var headers: [String]
    public var source: Source
    /// The program and its arguments, run without a shell; empty unless `source` is `command`.
    public var command: [String]
    /// How long the command may run before it is killed with its process group.
    public var timeoutSeconds: Double

    public init(scope: Scope, originText: String, headers: [String], source: Source, command: [String] = [],
                timeoutSeconds: Double = 10) {
        self.scope = scope
        self.originText = originText
        self.headers = headers
        self.source = source
        self.command = command
        self.timeoutSeconds = timeoutSeconds
    }
}

extension Array where Element == CredentialRule {
    /// The first rule that covers `origin` (SPEC §10), if any.
    public func rule(for origin: Origin) -> CredentialRule? {
        first { $0.scope.covers(origin) }
    }
}

import OutboxTelemetry

/// The whole effective configuration, every key with its default.
///
/// A plain value: build it with `parse(json:)` or `ConfigLoader.load`, which check every
/// value, or set fields directly in tests. Two keys go beyond `config.example.json`: `logLevel` and
/// `limits.shutdownTimeoutSeconds`.
public struct OutboxConfig: Sendable, Equatable {
    /// `forwardProxy`: which absolute-form and CONNECT requests are served.
    public struct ForwardProxy: Sendable, Equatable {
        /// When false, absolute-form and CONNECT requests are refused with 403.
        public var enabled = true
        /// Lowercased host names, `*.suffix` (subdomains of suffix, not suffix itself), or `*`.
        /// IPv6 literals are stored without brackets.
        public var allowedHosts = ["*"]
        /// Ports a CONNECT may reach, each 1...65535.
        public var connectPorts = [443]
        /// The documented defaults.
        public init() {}
    }

    /// `queue`: which requests are stored while an origin is unreachable, and for how long.
    public struct Queue: Sendable, Equatable {
        /// Queueable methods, case-sensitive tokens (RFC 9110 §9.1).
        public var methods = ["POST", "PUT", "PATCH", "DELETE"]
        /// Largest request body accepted, in bytes (≥ 1); larger → 413.
        public var maxBodyBytes = 10_485_760
        /// Most operations stored at once (≥ 1); more → 507.
        public var maxOperations = 1_000_000
        /// Age after which an unfinished operation fails as `expired`.
        public var ttlSeconds: Double = 604_800
        /// How long a completed operation and its response are kept.
        public var completedRetentionSeconds: Double = 86_400
        /// Upstream statuses that mean "unreachable", each 100...599.
        public var unavailableStatuses = [502, 503, 504]
        /// Where the queue lives: `dataDirectory` (the default) or a PostgreSQL database that
        /// several instances share (SPEC §9).
        public var store: Store = .local
        /// `queue.postgres`: the shared store's database, used when `store` is `postgres`.
        public var postgres = Postgres()
        /// The documented defaults.
        public init() {}

        /// `queue.store`.
        public enum Store: String, Sendable, Equatable, CaseIterable {
            case local
            case postgres
        }

        /// `queue.postgres` (SPEC §9).
        public struct Postgres: Sendable, Equatable {
            /// A libpq connection URI or `key=value` string; `OUTBOX_POSTGRES_URL` overrides it.
            /// May hold a password: it is shown as `[set]`, never as itself.
            public var url: String? = nil
            /// The schema Outbox owns: its tables, created and migrated at start. 1–63 bytes.
            public var schema = "outbox"
            /// Database connections of one instance (≥ 2: one carries the group commit, the
            /// others reads and lane claims).
            public var maxConnections = 4
            /// How long a lane claim lasts unless renewed; a dead instance's lanes are taken
            /// over once it lapses (> 0).
            public var leaseSeconds: Double = 10
            /// This instance's name in status and operation views; nil: host name and pid.
            public var instanceName: String? = nil
            /// The documented defaults.
            public init() {}
        }
    }

    /// `replay`: how stored operations are delivered.
    public struct Replay: Sendable, Equatable {
        /// Lanes of one origin delivered at the same time (≥ 1); within a lane, one operation
        /// at a time.
        public var maxConcurrentPerOrigin = 8
        /// The longest one replay attempt may take, its response head and body included (> 0):
        /// then it ends as a transport failure, retried after backoff.
        public var attemptTimeoutSeconds: Double = 60
        /// Statuses of a replayed attempt that mean "the credentials it carried are not good
        /// (any more)": the operation is held, pending, without spending a retry, and its lane
        /// waits for fresh credentials (SPEC §10). Each 400...599.
        public var authStatuses = [401]
        /// Where replays of an origin take fresh credentials from (SPEC §10); the first rule
        /// covering an origin applies.
        public var credentials: [CredentialRule] = []
        /// The documented defaults.
        public init() {}
    }

    /// `retry`: replay backoff. Delay before retry n is
    /// `baseDelaySeconds × multiplier^(n−1)`, capped at `maxDelaySeconds`, then jittered.
    public struct Retry: Sendable, Equatable {
        /// The preset the other values started from; explicit keys may have changed them since.
        public var preset: RetryPreset = .default
        /// Retries after the first attempt (≥ 0): at most `1 + maxRetries` attempts.
        public var maxRetries = 5
        /// Nominal delay before the first retry.
        public var baseDelaySeconds: Double = 1
        /// Growth factor per retry, 1...1000 (below 1 the backoff would shrink).
        public var multiplier: Double = 2
        /// Cap on the nominal delay.
        public var maxDelaySeconds: Double = 60
        /// Spread each delay over 50 %–150 % of its nominal value.
        public var jitter = true
        /// Statuses that are retried rather than failing the operation, each 100...599.
        public var retryableStatuses = [408, 425, 429, 500, 502, 503, 504]
        /// The documented defaults, which are the `default` preset.
        public init() {}
    }

    /// `reachability`: how an offline origin is probed, and how long an upstream may take.
    public struct ReachabilitySettings: Sendable, Equatable {
        /// Time between probes of an offline origin.
        public var probeIntervalSeconds: Double = 2
        /// nil: a probe is a TCP connect; else `GET probePath` expecting a status below 500.
        /// Starts with "/" and holds only visible ASCII.
        public var probePath: String? = nil
        /// Longest wait for a TCP (and TLS) connection to an upstream.
        public var connectTimeoutSeconds: Double = 2
        /// Longest wait for a response head once the request is sent.
        public var responseTimeoutSeconds: Double = 30
        /// An origin with nothing stored is forgotten (its status, its metric series) after
        /// this long without traffic; origins with stored work are kept and probed.
        public var forgetAfterSeconds: Double = 300
        /// The documented defaults.
        public init() {}
    }

    /// `idempotency`: the header carrying each queueable request's key.
    public struct Idempotency: Sendable, Equatable {
        /// A header field name (token), compared case-insensitively.
        public var header = "Idempotency-Key"
        /// The documented defaults.
        public init() {}
    }

    /// `admin`: where the admin API lives and who may use it.
    public struct Admin: Sendable, Equatable {
        /// Starts with "/", has no trailing "/", e.g. `/admin`.
        public var pathPrefix = "/admin"
        /// nil: the admin API is served on `listen`. Set: it is served only on this address
        /// (still under `pathPrefix`; port 0 picks a free port), and `listen` forwards the
        /// prefix to the upstream like any other path.
        public var listen: SocketAddressSpec? = nil
        /// When set, admin requests need `Authorization: Bearer <token>`. Visible ASCII, no spaces.
        public var token: String? = nil
        /// Lowercased header names whose values the admin API shows as `"[redacted]"`.
        public var redactHeaders = ["authorization", "proxy-authorization", "cookie", "set-cookie"]
        /// The documented defaults.
        public init() {}
    }

    /// `tls`: how `https://` origins are verified, the client certificate offered to them, and
    /// which `CONNECT` hosts Outbox terminates itself so that their writes can be queued.
    public struct TLS: Sendable, Equatable {
        /// `tls.intercept`: the hosts whose `CONNECT` tunnels are terminated, and the CA that
        /// signs the certificates shown to their clients.
        public struct Intercept: Sendable, Equatable {
            /// Patterns with `allowedHosts`' syntax (host, `*.suffix`, `*`), stored the same way.
            public var hosts: [String] = []
            /// PEM files of a CA to sign with; both or neither. Neither: a CA is created in
            /// `dataDirectory/ca/` at first need.
            public var caCertificateFile: String? = nil
            public var caKeyFile: String? = nil
            /// The documented defaults: nothing intercepted.
            public init() {}
        }

        /// A PEM bundle trusted in addition to the system store.
        public var caFile: String? = nil
        /// False turns certificate verification off (logged as a warning at start).
        public var verify = true
        /// A PEM certificate (chain) and key presented to origins that ask for one; both or neither.
        public var clientCertificateFile: String? = nil
        public var clientKeyFile: String? = nil
        /// See `Intercept`.
        public var intercept = Intercept()
        /// The documented defaults.
        public init() {}
    }

    /// `limits`: bounds on client connections.
    public struct Limits: Sendable, Equatable {
        /// Largest request head (start line, fields, terminator) in bytes (≥ 1); larger → 431.
        public var maxHeaderBytes = 65_536
        /// Longest time a client may take to send a complete head; then 408.
        public var headerTimeoutSeconds: Double = 10
        /// Longest quiet time on a keep-alive connection between requests.
        public var idleTimeoutSeconds: Double = 60
        /// Most client connections open at once (≥ 1).
        public var maxConnections = 4096
        /// Request-body bytes all exchanges together keep in memory (≥ 0); bodies beyond it
        /// are kept in spill files in `dataDirectory` until the upstream answers.
        public var bodyMemoryBytes = 67_108_864
        /// Extension key: longest wait for in-flight exchanges after SIGTERM/SIGINT.
        public var shutdownTimeoutSeconds: Double = 10
        /// The documented defaults plus `shutdownTimeoutSeconds` 10.
        public init() {}
    }

    /// Address the proxy listens on; port 0 picks a free port.
    public var listen = SocketAddressSpec(host: "127.0.0.1", port: 8080)
    /// Where origin-form requests go; nil: only forward-proxy (absolute-form) requests.
    public var upstream: UpstreamURL? = nil
    /// Directory for the durable queue, created if missing.
    public var dataDirectory = "./outbox-data"
    /// Extension key `logLevel`: the least severe level that is logged.
    public var logLevel: LogLevel = .info
    /// See `ForwardProxy`.
    public var forwardProxy = ForwardProxy()
    /// See `Queue`.
    public var queue = Queue()
    /// See `Replay`.
    public var replay = Replay()
    /// See `Retry`.
    public var retry = Retry()
    /// See `Reachability`.
    public var reachability = ReachabilitySettings()
    /// See `Idempotency`.
    public var idempotency = Idempotency()
    /// See `Admin`.
    public var admin = Admin()
    /// See `TLS`.
    public var tls = TLS()
    /// See `Limits`.
    public var limits = Limits()

    /// Every key at its default (`logLevel` info, `limits.shutdownTimeoutSeconds` 10).
    public init() {}
}

import OutboxConfig
import OutboxCredentials
import OutboxFaults
import OutboxHTTP
import OutboxModel
import OutboxNet
import OutboxQueue
import OutboxTelemetry

/// What every connection needs to know, built once from the config: the parts of it the proxy
/// path reads, the logger, and the transports. Immutable, so loops share it freely.
final class ProxyContext: Sendable {
    let upstream: UpstreamURL?
    /// `upstream`'s origin, made once.
    let upstreamOrigin: Origin?
    let forwardProxy: OutboxConfig.ForwardProxy
    let parserLimits: HTTPParserLimits
    let headerTimeout: UInt64
    let idleTimeout: UInt64
    let shutdownTimeout: Double
    let retryAfterSeconds: Int
    let upstreamTimeouts: UpstreamTimeouts
    let logger: Logger
    /// How `https://` origins are verified (and the client certificate shown to them).
    let upstreamTLS: TLSContext?
    /// `tls.intercept.hosts`, and the issuer of the certificates shown to their clients (nil
    /// when nothing is intercepted).
    let interceptHosts: OutboxConfig.HostPatterns
    let leafIssuer: LeafCertificateIssuer?
    let idempotencyHeader: String
    /// The durable queue; nil runs Outbox as a plain proxy.
    let queue: QueueGateway?
    let queueMethods: Set<String>
    let queueMethodList: String
    let unavailableStatuses: Set<Int>
    let adminPrefix: String
    /// The admin API with its gate; nil while no queue runs (the proxy then treats admin paths
    /// as traffic).
    let admin: (any AdminEndpoint)?
    /// Whether `admin.listen` is set: the admin API is then served only on its own listener.
    let adminHasOwnListener: Bool
    /// What a `202` takes from the configuration; its `Location` is a stored operation's URL
    /// without its id: a path on this listener, or an absolute URL when the admin API has its
    /// own listener (where a path on the main listener would reach the upstream instead).
    let acceptedTemplate: QueueAnswer.AcceptedTemplate
    /// The same with the `Location` as an absolute `http://` URL, for a `202` inside an
    /// intercepted tunnel, where a path would resolve against the origin.
    let absoluteAcceptedTemplate: QueueAnswer.AcceptedTemplate
    let metrics: Metrics
    /// The fault rules every upstream request passes (empty unless a test adds some).
    let faults: FaultBook
    /// The live events `GET /admin/events` streams; nil without a queue.
    let events: EventHub?
    /// What every loop's pool refuses to connect to: Outbox's own listeners and, when `listen`
    /// is not loopback, internal addresses of hosts that `allowedHosts` names by a wildcard only.
    let targetPolicy: UpstreamTargetPolicy
    /// `limits.bodyMemoryBytes`, shared by every loop's exchanges.
    let bodyMemory: BodyMemoryBudget
    /// Where request bodies beyond `bodyMemory` are spilled.
    let dataDirectory: String
    /// Replay credentials, which learn from what clients send (SPEC §10); nil without a queue.
    let credentials: CredentialBook?

    /// - Parameter adminListenAddress: the bound `admin.listen` address (its port resolved),
    ///   nil when the admin API lives on the main listener.
    /// - Parameter listeners: the bound listening sockets' addresses, the main one first: the
    ///   targets no request may be forwarded to.
    init(config: OutboxConfig, logger: Logger, upstreamTLS: TLSContext?, leafIssuer: LeafCertificateIssuer? = nil,
         queue: QueueGateway? = nil, admin: (any AdminEndpoint)? = nil, metrics: Metrics = Metrics(),
         adminListenAddress: SocketAddressSpec? = nil, mainListenAddress: SocketAddressSpec? = nil,
         listeners: [SocketAddress] = [], faults: FaultBook = FaultBook(), events: EventHub? = nil,
         credentials: CredentialBook? = nil) {
        self.credentials = credentials
        self.faults = faults
        self.events = events
        self.upstreamTLS = upstreamTLS
        self.leafIssuer = leafIssuer
        interceptHosts = OutboxConfig.HostPatterns(config.tls.intercept.hosts)
        self.queue = queue
        self.admin = admin
        self.metrics = metrics
        queueMethods = Set(config.queue.methods)
        queueMethodList = config.queue.methods.joined(separator: ", ")
        unavailableStatuses = Set(config.queue.unavailableStatuses)
        adminPrefix = config.admin.pathPrefix
        adminHasOwnListener = config.admin.listen != nil
        let operations = config.admin.pathPrefix + "/operations/"
        acceptedTemplate = QueueAnswer.AcceptedTemplate(
            locationBase: (adminListenAddress.map { "http://\($0)" } ?? "") + operations,
            idempotencyHeader: config.idempotency.header)
        absoluteAcceptedTemplate = QueueAnswer.AcceptedTemplate(
            locationBase: "http://\(adminListenAddress ?? mainListenAddress ?? config.listen)" + operations,
            idempotencyHeader: config.idempotency.header)
        upstream = config.upstream
        upstreamOrigin = config.upstream?.origin
        forwardProxy = config.forwardProxy
        parserLimits = HTTPParserLimits(maxHeaderBytes: config.limits.maxHeaderBytes,
                                        maxBodyBytes: config.queue.maxBodyBytes)
        headerTimeout = Clock.nanos(config.limits.headerTimeoutSeconds)
        idleTimeout = Clock.nanos(config.limits.idleTimeoutSeconds)
        shutdownTimeout = config.limits.shutdownTimeoutSeconds
        retryAfterSeconds = max(1, Int(config.reachability.probeIntervalSeconds.rounded(.up)))
        upstreamTimeouts = UpstreamTimeouts(connect: config.reachability.connectTimeoutSeconds,
                                            response: config.reachability.responseTimeoutSeconds,
                                            poolIdle: min(config.limits.idleTimeoutSeconds, 30))
        self.logger = logger
        idempotencyHeader = config.idempotency.header
        bodyMemory = BodyMemoryBudget(limit: config.limits.bodyMemoryBytes)
        dataDirectory = config.dataDirectory
        targetPolicy = Self.targetPolicy(config: config, listeners: listeners)
    }

    /// SPEC §3. With a loopback `listen` every client is local, so `*` reaches loopback as the
    /// client itself could; otherwise only hosts named exactly in `allowedHosts`, and the
    /// configured upstream at its port, may resolve to loopback, link-local or unspecified
    /// addresses.
    static func targetPolicy(config: OutboxConfig, listeners: [SocketAddress]) -> UpstreamTargetPolicy {
        let listensOnLoopback = listeners.first?.isLoopback ?? true
        return UpstreamTargetPolicy(
            listeners: listeners,
            internalAddressHosts: listensOnLoopback ? nil : OutboxConfig.HostPatterns(config.forwardProxy.allowedHosts).exactNames,
            internalAddressOrigins: config.upstream.map { [($0.host, $0.port)] } ?? [])
    }

    /// Whether a `CONNECT` to `host` is terminated here instead of tunnelled.
    func intercepts(_ host: String) -> Bool {
        leafIssuer != nil && interceptHosts.matches(host)
    }

    /// The smallest timeout, so the loop sweeps often enough to honour it within a quarter.
    var sweepInterval: Double {
        let smallest = [Double(headerTimeout), Double(idleTimeout)].map { $0 / 1e9 }
            + [upstreamTimeouts.connect, upstreamTimeouts.response]
        return min(0.25, max(0.005, (smallest.filter { $0 > 0 }.min() ?? 1) / 4))
    }
}


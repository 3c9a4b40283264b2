import Dispatch
import OutboxAdmin
import OutboxConfig
import OutboxCredentials
import OutboxFaults
import OutboxHTTP
import OutboxModel
import OutboxNet
import OutboxProxy
import OutboxQueue
import OutboxReplay
import OutboxStorage
import OutboxTelemetry
import Synchronization

/// The whole of Outbox assembled from a config: the durable queue, the proxy server, the
/// replayer and the reachability probes. `main` only parses, starts, waits for a signal and
/// stops; everything here is reachable from tests.
public final class OutboxService: Sendable {
    private let queue: any QueueStore
    private let server: ProxyServer
    private let config: OutboxConfig
    private let logger: Logger
    /// Set once the server's loops run; the reachability probe (made earlier) reads it.
    private final class ClientSlot: Sendable {
        let client = Mutex<UpstreamClient?>(nil)
        let tls = Mutex<TLSContext?>(nil)
    }
    private let probeClient = ClientSlot()
    private let maintenance = Mutex<Task<Void, Never>?>(nil)
    /// Set by `start`; `stop` stops it before the loops it sends on.
    private let replayer = Mutex<Replayer?>(nil)
    private let metrics = Metrics()
    /// Replay credentials (SPEC §10): learnt by the proxy, set through the admin API, asked for
    /// by the replayer.
    private let credentials: CredentialBook
    /// The CA that signs intercepted hosts' certificates; nil when no host is intercepted.
    private let interceptionCA: InterceptionCA?

    /// With hosts to intercept, loads or creates the interception CA (refusing one that does
    /// not cover them all); then opens the queue (recovering its log). Either failure is a
    /// one-line error with its exit status.
    public init(config: OutboxConfig, logger: Logger) throws(ServiceSetupError) {
        self.config = config
        self.logger = logger
        // At start, so that a CA that cannot serve the config stops Outbox before it listens,
        // and its fingerprint is ready for `/admin/status`.
        interceptionCA = config.tls.intercept.hosts.isEmpty ? nil : try Self.interceptionCA(config: config)
        var leafIssuer: LeafCertificateIssuer?
        if let interceptionCA {
            do {
                leafIssuer = try LeafCertificateIssuer(authority: interceptionCA)
            } catch {
                throw ServiceSetupError("cannot prepare interception certificates: \(error.reason)", exitCode: 1)
            }
        }
        let faults = FaultBook()
        let events = EventHub()
        let probeClient = self.probeClient
        let probePath = config.reachability.probePath
        let tcpProbe = TCPProbe.make(timeout: config.reachability.connectTimeoutSeconds,
                                     tls: { probeClient.tls.withLock { $0 } })
        let reachability = Reachability(probeIntervalSeconds: config.reachability.probeIntervalSeconds,
                                        forgetAfterSeconds: config.reachability.forgetAfterSeconds, probe: { origin in
            // An origin a fault rule holds offline fails its probes without a connection.
            if faults.holdsOffline(origin) { return .unanswered }
            // `GET probePath` answering below 500 means online; else a connect (with the
            // handshake for https) is enough.
            guard let probePath, let client = probeClient.client.withLock({ $0 }) else { return await tcpProbe(origin) }
            var headers = HTTPHeaders()
            headers.add("Host", origin.authority)
            headers.add("Via", ProxyRules.via)
            let result = await client.send(to: origin, head: HTTPRequestHead(method: "GET", target: probePath, headers: headers),
                                           body: [], maxResponseBytes: 4096, purpose: .probe)
            switch result {
            case .success(let response): return ProbeOutcome(answered: response.head.status < 500)
            // No socket for the probe: Outbox's shortage, not the origin's answer.
            case .failure(.localResourcesExhausted(let reason)): return .notProbed(reason)
            case .failure: return .unanswered
            }
        }, events: events)
        queue = try Self.openStore(config: config, reachability: reachability, logger: logger, metrics: metrics, events: events)
        credentials = CredentialBook(rules: config.replay.credentials, directory: config.dataDirectory, logger: logger)
        let store = queue
        // Fresh credentials for an origin make its held writes due at once.
        credentials.onChange { origin in Task { await store.wakeHeld(origin: origin) } }
        // The reverse-mode upstream stays listed, probed or not: it is the origin of this proxy.
        if let upstream = config.upstream { reachability.register(upstream.origin, pinned: true) }
        let admin = AdminAPI(queue: queue, redactHeaders: Set(config.admin.redactHeaders.map { $0.lowercased() }),
                             version: Outbox.version, startedAt: WallClock.millis(), metrics: metrics,
                             prefix: config.admin.pathPrefix, faults: faults,
                             statusSettings: Self.statusSettings(config: config, interceptionCA: interceptionCA),
                             credentials: credentials)
        server = ProxyServer(config: config, logger: logger, queue: queue, leafIssuer: leafIssuer,
                             admin: GatedAdminAPI(api: admin, gate: AdminGate(config: config)), metrics: metrics,
                             faults: faults, events: events, credentials: credentials)
    }

    /// Binds, starts the loops, the replayer and the maintenance task; returns the bound
    /// addresses of `listen` and, when set, `admin.listen`.
    public func start() throws(ServerStartError) -> (main: SocketAddressSpec, admin: SocketAddressSpec?) {
        let addresses = try server.start()
        if !config.tls.verify {
            logger.warn("tls_verify_disabled", ["note": "certificates of https origins are not checked"])
        }
        if let interceptionCA {
            logger.info("interception_ca", ["certificate": interceptionCA.certificateFile, "sha256": interceptionCA.sha256Fingerprint,
                                            "hosts": config.tls.intercept.hosts.joined(separator: ",")])
        }
        let client = server.upstreamClient
        probeClient.client.withLock { $0 = client }
        probeClient.tls.withLock { $0 = server.upstreamTLS }
        let replayer = Replayer(source: queue, client: client, reachability: queue.reachability,
                                policy: RetryPolicy(config.retry), unavailableStatuses: Set(config.queue.unavailableStatuses),
                                authStatuses: Set(config.replay.authStatuses), credentials: credentials,
                                ttlSeconds: config.queue.ttlSeconds, logger: logger, metrics: metrics,
                                maxConcurrentPerOrigin: config.replay.maxConcurrentPerOrigin,
                                attemptTimeoutSeconds: config.replay.attemptTimeoutSeconds, executor: client.loopExecutor,
                                workerExecutors: client.loopExecutors)
        self.replayer.withLock { $0 = replayer }
        queue.attach(replayer)
        let queue = self.queue
        maintenance.withLock {
            $0 = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: 1_000_000_000)
                    await queue.maintain()
                }
            }
        }
        return addresses
    }

    /// Stops accepting and starting replay attempts; lets the client exchanges and the replay
    /// attempts in flight finish, side by side, within `timeout` (then cancels them); writes
    /// their outcomes and closes storage. A clean stop therefore sends nothing twice.
    @discardableResult
    public func stop(timeout: Double) -> Bool {
        maintenance.withLock { $0?.cancel() }
        // Started first, so that attempts stop starting while the clients drain; the loops
        // they run on stop only once it returned.
        let replayStopped = DispatchSemaphore(value: 0)
        if let replayer = replayer.withLock({ $0 }) {
            Task {
                await replayer.stop(boundSeconds: timeout)
                replayStopped.signal()
            }
        } else {
            replayStopped.signal()
        }
        let deadline = DispatchTime.now() + timeout
        let clean = server.shutdown(timeout: timeout, beforeStoppingLoops: {
            // The replayer cancels what is still in flight at the bound; a cancelled call ends
            // on its loop's next turn, so a short grace covers the hand-over.
            if replayStopped.wait(timeout: deadline + 2) == .timedOut {
                logger.warn("replay_stop_timeout", ["seconds": String(timeout)])
            }
        })
        queue.close()
        return clean
    }

    // MARK: Process

    // `main` imports only this layer, the config and the logger: the few process-level calls
    // it makes into lower layers pass through here.

    /// Blocks SIGTERM and SIGINT (and ignores SIGPIPE); call before any thread exists, so that
    /// every thread inherits the mask and `waitForTerminationSignal` receives them.
    public static func blockTerminationSignals() {
        TerminationSignals.block()
    }

    /// Waits for SIGTERM or SIGINT and returns which one arrived.
    public static func waitForTerminationSignal() -> Int32 {
        TerminationSignals.wait()
    }

    /// Raises the soft open-file limit to the hard one (SPEC §6). Call before the queue opens its
    /// files and the server its sockets; log what it did once Outbox has started (a start that
    /// fails says so in one line, and only that line).
    public static func raiseOpenFileLimit() -> OpenFileLimitRaise {
        OpenFileLimitRaise(result: OpenFileLimit.raiseSoftToHard())
    }

    /// Creates the data directory if needed; a one-line problem when it cannot be used.
    public static func prepareDataDirectory(_ path: String) -> String? {
        DataDirectory.prepare(path)
    }
}

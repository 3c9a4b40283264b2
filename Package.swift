// swift-tools-version:6.0
import PackageDescription

// One target per layer; each lists exactly the modules it imports, so the compiler rejects an
// import that points the wrong way (docs/architecture.md draws the graph, .ci/check-imports
// keeps these lists equal to the imports).
//
// Dynamic exclusivity checks cost ~2.5 % of the proxy's CPU on the forwarding path
// (measured with perf). Debug builds, and so every test run, keep them. Cross-module
// optimisation lets the optimiser inline and specialise the codec's small functions into the
// proxy as it did when everything was one module (README, Performance).
let releaseSettings: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked", "-cross-module-optimization"], .when(configuration: .release))]

let queueClient: [Target.Dependency] = ["OutboxQueue", "OutboxConfig", "OutboxModel", "OutboxTelemetry", "OutboxHTTP"]

let package = Package(
    name: "Outbox",
    products: [
        .executable(name: "outbox", targets: ["outbox"]),
    ],
    targets: [
        // epoll, eventfd and friends: Glibc's module map does not export them.
        .target(name: "CSystem"),
        // TLS on the event loops: the system OpenSSL 3, and C wrappers for its macros.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .target(name: "CTLSShim"),
        // The PostgreSQL store's client: libpq, PostgreSQL's own C library (SPEC §9).
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(name: "OutboxHTTP", swiftSettings: releaseSettings),
        .target(name: "OutboxModel", dependencies: ["OutboxHTTP", "COpenSSL"], swiftSettings: releaseSettings),
        .target(name: "OutboxTelemetry", dependencies: ["OutboxModel"], swiftSettings: releaseSettings),
        .target(name: "OutboxConfig", dependencies: ["OutboxModel", "OutboxTelemetry"], swiftSettings: releaseSettings),
        .target(name: "OutboxStorage", dependencies: ["OutboxModel", "OutboxTelemetry", "OutboxHTTP", "CSystem"],
                swiftSettings: releaseSettings),
        .target(name: "OutboxQueue",
                dependencies: ["OutboxStorage", "OutboxConfig", "OutboxModel", "OutboxTelemetry", "OutboxHTTP"],
                swiftSettings: releaseSettings),
        // libpq driven with deadlines on threads of its own: connections, group commit, lanes, the
        // schema, and the operations' rows (made from Model's values, as Storage makes records).
        .target(name: "OutboxPostgres", dependencies: ["CLibPQ", "OutboxQueue", "OutboxConfig", "OutboxModel", "OutboxTelemetry", "OutboxHTTP"], resources: [.embedInCode("Migrations/v001_queue.sql"), .embedInCode("Migrations/v002_lane_pokes.sql"),
                           .embedInCode("Migrations/v003_status_counts.sql"), .embedInCode("Migrations/v004_lane_marks.sql"),
                           .embedInCode("Migrations/v005_lane_mark_arrivals.sql"),
                           .embedInCode("Migrations/v006_states.sql")],
                swiftSettings: releaseSettings),
        // Credentials for replay (SPEC §10): values set by hand, learnt from clients, or a
        // command's answers; shared by the proxy (which learns), the admin API and the replayer.
        .target(name: "OutboxCredentials", dependencies: ["OutboxConfig", "OutboxModel", "OutboxTelemetry", "OutboxHTTP", "CSystem"],
                swiftSettings: releaseSettings),
        // Fault rules (what to fail, when, how often): values and counters only, shared by the
        // proxy's transports, the probes and the admin API.
        .target(name: "OutboxFaults", dependencies: ["OutboxModel"], swiftSettings: releaseSettings),
        .target(name: "OutboxNet", dependencies: ["OutboxHTTP", "OutboxModel", "CSystem", "COpenSSL", "CTLSShim"], swiftSettings: releaseSettings),
        // The replayer and the admin API are peers on top of the queue: neither knows the other,
        // the network or the proxy.
        .target(name: "OutboxReplay", dependencies: queueClient + ["OutboxCredentials"], swiftSettings: releaseSettings),
        .target(name: "OutboxAdmin", dependencies: queueClient + ["OutboxFaults", "OutboxCredentials"], resources: [.embedInCode("Resources/dashboard.html")],
                swiftSettings: releaseSettings),
        .target(name: "OutboxProxy",
                dependencies: ["OutboxNet", "OutboxQueue", "OutboxCredentials", "OutboxFaults", "OutboxConfig", "OutboxModel",
                               "OutboxTelemetry", "OutboxHTTP", "CSystem"],
                swiftSettings: releaseSettings),
        .target(name: "OutboxService",
                dependencies: ["OutboxProxy", "OutboxAdmin", "OutboxReplay", "OutboxNet", "OutboxQueue", "OutboxStorage", "OutboxPostgres",
                               "OutboxCredentials", "OutboxFaults",
                               "OutboxConfig", "OutboxModel", "OutboxTelemetry", "OutboxHTTP"],
                swiftSettings: releaseSettings),
        // The admin commands (`outbox status`, `drain`, …): a client of the admin API over HTTP,
        // so it knows the API's wire format only, never the server's types.
        .target(name: "OutboxControl", dependencies: ["OutboxConfig", "OutboxModel", "OutboxHTTP"], swiftSettings: releaseSettings),
        .executableTarget(name: "outbox", dependencies: ["OutboxService", "OutboxControl", "OutboxConfig", "OutboxTelemetry"]),
        .testTarget(name: "OutboxCoreTests",
                    dependencies: ["OutboxHTTP", "OutboxModel", "OutboxTelemetry", "OutboxConfig", "OutboxStorage", "OutboxQueue",
                                   "OutboxReplay", "OutboxAdmin", "OutboxProxy", "OutboxNet", "OutboxFaults", "OutboxPostgres", "OutboxCredentials", "CSystem",
                                   "CTestParallelism", "TestPrerequisites", "TestPostgres"]),
        // Linked into the test binary for its load-time effect: how many tests run at once.
        .target(name: "CTestParallelism", path: "Tests/CTestParallelism"),
        // What a test needs from the machine: skipped without it, failed without it under CI=true.
        .target(name: "TestPrerequisites", path: "Tests/TestPrerequisites"),
        // A private PostgreSQL server for the tests of both test targets (initdb into a temp dir).
        .target(name: "TestPostgres", dependencies: ["OutboxPostgres"], path: "Tests/TestPostgres"),
        // The harness digests bodies with the product's SHA-256 (checked on its own by the core tests).
        .testTarget(name: "OutboxIntegrationTests", dependencies: ["OutboxService", "OutboxModel", "OutboxPostgres", "CSystem", "TestPrerequisites", "TestPostgres",
                                                                              "outbox"]),
    ],
    swiftLanguageModes: [.v6]
)

// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Outbox",
    products: [
        .executable(name: "outbox", targets: ["outbox"]),
        .library(name: "OutboxCore", targets: ["OutboxCore"]),
    ],
    targets: [
        // epoll, eventfd and friends: Glibc's module map does not export them.
        .target(name: "CSystem"),
        .target(
            name: "OutboxCore",
            dependencies: ["CSystem"],
            // Dynamic exclusivity checks cost ~2.5 % of the proxy's CPU on the forwarding path
            // (measured with perf). Debug builds, and so every test run, keep them.
            swiftSettings: [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]
        ),
        .executableTarget(name: "outbox", dependencies: ["OutboxCore"]),
        .testTarget(name: "OutboxCoreTests", dependencies: ["OutboxCore", "CSystem"]),
        .testTarget(name: "OutboxIntegrationTests", dependencies: ["OutboxCore", "CSystem", "outbox"]),
    ],
    swiftLanguageModes: [.v6]
)

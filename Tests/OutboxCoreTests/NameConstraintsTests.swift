@testable import OutboxNet
import Testing

/// The constraints a created CA gets from the intercept patterns, and the coverage check a
/// later start makes with them, as tables (the certificates themselves are checked with
/// `openssl` in `InterceptionCATests`).
@Suite("Name constraints")
struct NameConstraintsTests {
    static let allIPv4: [UInt8] = Array(repeating: 0, count: 8)
    static let allIPv6: [UInt8] = Array(repeating: 0, count: 32)
    static let loopback: [UInt8] = [127, 0, 0, 1, 255, 255, 255, 255]

    struct PlanCase: Sendable, CustomTestStringConvertible {
        let patterns: [String]
        let expected: NameConstraints?
        var testDescription: String { patterns.description }
    }

    @Test(arguments: [
        // A name permits itself and, with nothing else under it, excludes its subdomains.
        PlanCase(patterns: ["api.example.com"], expected: NameConstraints(
            permittedDNS: ["api.example.com"], excludedDNS: [".api.example.com"], excludedIP: [allIPv4, allIPv6])),
        // `*.suffix` permits the names under the suffix only.
        PlanCase(patterns: ["*.example.com"], expected: NameConstraints(
            permittedDNS: [".example.com"], excludedIP: [allIPv4, allIPv6])),
        // Listing both the name and its wildcard permits both, and excludes nothing under it.
        PlanCase(patterns: ["example.com", "*.example.com"], expected: NameConstraints(
            permittedDNS: ["example.com", ".example.com"], excludedIP: [allIPv4, allIPv6])),
        // A name under another listed name keeps the parent's subdomains permitted.
        PlanCase(patterns: ["example.com", "api.example.com"], expected: NameConstraints(
            permittedDNS: ["example.com", "api.example.com"], excludedDNS: [".api.example.com"],
            excludedIP: [allIPv4, allIPv6])),
        // A name under a wildcard: the wildcard wants its subdomains too.
        PlanCase(patterns: ["*.example.com", "api.example.com"], expected: NameConstraints(
            permittedDNS: ["api.example.com", ".example.com"], excludedIP: [allIPv4, allIPv6])),
        // Addresses only: every DNS name is excluded, as is the other address family.
        PlanCase(patterns: ["127.0.0.1"], expected: NameConstraints(
            excludedDNS: [""], permittedIP: [loopback], excludedIP: [allIPv6])),
        PlanCase(patterns: ["::1", "API.example.com", "api.example.com"], expected: NameConstraints(
            permittedDNS: ["api.example.com"], excludedDNS: [".api.example.com"],
            permittedIP: [Array(repeating: 0, count: 15) + [1] + Array(repeating: 255, count: 16)], excludedIP: [allIPv4])),
        // A dotted-quad suffix names no host: kept as a DNS suffix, it widens nothing.
        PlanCase(patterns: ["*.10.0.0.1"], expected: NameConstraints(
            permittedDNS: [".10.0.0.1"], excludedIP: [allIPv4, allIPv6])),
        // `*` allows no constraint at all.
        PlanCase(patterns: ["api.example.com", "*"], expected: nil),
    ])
    func interceptPatternsBecomeTheseConstraints(_ plan: PlanCase) {
        #expect(NameConstraints(interceptPatterns: plan.patterns) == plan.expected)
    }

    struct CoverCase: Sendable, CustomTestStringConvertible {
        let createdFor: [String]
        let pattern: String
        let covered: Bool
        var testDescription: String { "\(createdFor) covers \(pattern): \(covered)" }
    }

    @Test(arguments: [
        CoverCase(createdFor: ["api.example.com"], pattern: "api.example.com", covered: true),
        CoverCase(createdFor: ["api.example.com"], pattern: "API.Example.com", covered: true),
        CoverCase(createdFor: ["api.example.com"], pattern: "x.api.example.com", covered: false),
        CoverCase(createdFor: ["api.example.com"], pattern: "*.api.example.com", covered: false),
        CoverCase(createdFor: ["api.example.com"], pattern: "example.com", covered: false),
        CoverCase(createdFor: ["api.example.com"], pattern: "127.0.0.1", covered: false),
        CoverCase(createdFor: ["*.example.com"], pattern: "api.example.com", covered: true),
        CoverCase(createdFor: ["*.example.com"], pattern: "*.example.com", covered: true),
        CoverCase(createdFor: ["*.example.com"], pattern: "*.api.example.com", covered: true),
        CoverCase(createdFor: ["*.example.com"], pattern: "example.com", covered: false),
        CoverCase(createdFor: ["*.example.com"], pattern: "notexample.com", covered: false),
        CoverCase(createdFor: ["*.example.com"], pattern: "*.com", covered: false),
        CoverCase(createdFor: ["example.com", "*.example.com"], pattern: "example.com", covered: true),
        CoverCase(createdFor: ["127.0.0.1"], pattern: "127.0.0.1", covered: true),
        CoverCase(createdFor: ["127.0.0.1"], pattern: "127.0.0.2", covered: false),
        CoverCase(createdFor: ["127.0.0.1"], pattern: "::ffff:127.0.0.1", covered: false),
        CoverCase(createdFor: ["127.0.0.1"], pattern: "localhost", covered: false),
        CoverCase(createdFor: ["::1"], pattern: "[::1]", covered: true),
        CoverCase(createdFor: ["api.example.com"], pattern: "*", covered: false),
        CoverCase(createdFor: ["*.10.0.0.1"], pattern: "*.10.0.0.1", covered: true),
        CoverCase(createdFor: ["*.10.0.0.1"], pattern: "10.0.0.1", covered: false),
    ])
    func aLaterPatternIsCoveredOnlyWhenEveryNameItMatchesIsPermitted(_ cover: CoverCase) throws {
        let constraints = try #require(NameConstraints(interceptPatterns: cover.createdFor))
        #expect(constraints.permits(pattern: cover.pattern) == cover.covered)
    }

    /// The subtree rules as OpenSSL applies them to one name (its `nc_dns`).
    @Test func dnsSubtreesMatchOnLabelBoundaries() {
        #expect(NameConstraints.dns("example.com", matches: "example.com"))
        #expect(NameConstraints.dns("example.com", matches: "a.example.com"))
        #expect(!NameConstraints.dns("example.com", matches: "badexample.com"))
        #expect(!NameConstraints.dns(".example.com", matches: "example.com"))
        #expect(NameConstraints.dns(".example.com", matches: "a.b.example.com"))
        #expect(NameConstraints.dns("", matches: "anything"))
        #expect(NameConstraints.dns("Example.COM", matches: "a.example.com"))
    }
}

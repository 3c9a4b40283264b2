@testable import OutboxModel
@testable import OutboxNet
import Testing

/// The pool's target rules (SPEC §3) as a pure function of resolved addresses: which of them
/// reach one of Outbox's listeners, and which internal addresses a host may not reach.
@Suite("Upstream target policy: own listeners and internal addresses")
struct UpstreamTargetPolicyTests {
    static func address(_ text: String, _ port: Int = 0) throws -> SocketAddress {
        try #require(SocketAddress.resolveNumeric(text, port: port), "\(text)")
    }

    static func refusal(listeners: [(String, Int)], internalHosts: Set<String>? = nil, host: String = "target.example",
                        resolvesTo targets: [String], port: Int, local: [String] = []) throws -> UpstreamError? {
        let policy = UpstreamTargetPolicy(listeners: try listeners.map { try address($0.0, $0.1) },
                                          internalAddressHosts: internalHosts)
        let localAddresses = try local.map { try #require(address($0).ip) }
        return policy.verdict(host: host, addresses: try targets.map { try address($0, port) }, localAddresses: localAddresses)
            .refusal(port: port)
    }

    @Test func aTargetAtAListenersAddressAndPortIsAForwardingLoop() throws {
        #expect(try Self.refusal(listeners: [("127.0.0.1", 8080)], resolvesTo: ["127.0.0.1"], port: 8080)
                == .targetRefused(.ownListener(address: "127.0.0.1:8080")))
        #expect(try Self.refusal(listeners: [("127.0.0.1", 8080)], resolvesTo: ["127.0.0.1"], port: 8081) == nil)
        // A loopback listener takes only its own address.
        #expect(try Self.refusal(listeners: [("127.0.0.1", 8080)], resolvesTo: ["127.0.0.2"], port: 8080) == nil)
        #expect(try Self.refusal(listeners: [("::1", 8080)], resolvesTo: ["::1"], port: 8080)
                == .targetRefused(.ownListener(address: "[::1]:8080")))
        // The admin listener counts as much as the main one.
        #expect(try Self.refusal(listeners: [("127.0.0.1", 8080), ("127.0.0.1", 8081)], resolvesTo: ["127.0.0.1"], port: 8081)
                == .targetRefused(.ownListener(address: "127.0.0.1:8081")))
    }

    @Test func anyOfANamesAddressesCounts_AsConnectionsMayGoToAnyOfThem() throws {
        // `localhost` as glibc resolves it: ::1 first, then 127.0.0.1.
        #expect(try Self.refusal(listeners: [("127.0.0.1", 8080)], resolvesTo: ["::1", "127.0.0.1"], port: 8080)
                == .targetRefused(.ownListener(address: "127.0.0.1:8080")))
    }

    @Test func anIPv4MappedAddressIsItsIPv4Address() throws {
        #expect(try Self.refusal(listeners: [("127.0.0.1", 8080)], resolvesTo: ["::ffff:127.0.0.1"], port: 8080)
                == .targetRefused(.ownListener(address: "127.0.0.1:8080")))
    }

    @Test func aWildcardListenerIsReachedByEveryLocalAddressOfItsFamilies() throws {
        let v4 = [("0.0.0.0", 8080)]
        for target in ["127.0.0.1", "127.0.0.2", "192.0.2.7", "0.0.0.0"] {
            #expect(try Self.refusal(listeners: v4, resolvesTo: [target], port: 8080, local: ["127.0.0.1", "192.0.2.7"]) != nil,
                    "\(target)")
        }
        #expect(try Self.refusal(listeners: v4, resolvesTo: ["192.0.2.8"], port: 8080, local: ["192.0.2.7"]) == nil)
        // 0.0.0.0 takes no IPv6 connections; `::` takes both families.
        #expect(try Self.refusal(listeners: v4, resolvesTo: ["::1"], port: 8080) == nil)
        let dual = [("::", 8080)]
        for target in ["::1", "127.0.0.1", "2001:db8::7", "::"] {
            #expect(try Self.refusal(listeners: dual, resolvesTo: [target], port: 8080, local: ["2001:db8::7"]) != nil,
                    "\(target)")
        }
    }

    @Test func anUnspecifiedTargetIsThisHost_AndReachesEveryListenerAtItsPort() throws {
        #expect(try Self.refusal(listeners: [("127.0.0.1", 8080)], resolvesTo: ["0.0.0.0"], port: 8080) != nil)
        #expect(try Self.refusal(listeners: [("127.0.0.1", 8080)], resolvesTo: ["::"], port: 8080) != nil)
    }

    @Test func internalAddressesAreRefusedToHostsNotNamedExactly() throws {
        let named: Set<String> = ["named.example", "127.0.0.1"]
        for target in ["127.0.0.1", "127.9.9.9", "::1", "169.254.169.254", "fe80::1", "febf::1", "0.0.0.0", "::", "::ffff:127.0.0.1"] {
            let refusal = try Self.refusal(listeners: [], internalHosts: named, resolvesTo: [target], port: 80)
            #expect(refusal == .targetRefused(.internalAddress(address: try #require(Self.address(target).ip).description)),
                    "\(target)")
        }
        for target in ["10.0.0.1", "192.168.1.1", "172.16.0.1", "8.8.8.8", "2001:db8::1", "fec0::1", "169.255.0.1", "126.0.0.1"] {
            #expect(try Self.refusal(listeners: [], internalHosts: named, resolvesTo: [target], port: 80) == nil, "\(target)")
        }
        for host in ["named.example", "NAMED.example.", "127.0.0.1"] {
            #expect(try Self.refusal(listeners: [], internalHosts: named, host: host, resolvesTo: ["127.0.0.1"], port: 80) == nil,
                    "\(host)")
        }
        // With a loopback `listen` no host is kept from internal addresses.
        #expect(try Self.refusal(listeners: [], internalHosts: nil, resolvesTo: ["127.0.0.1"], port: 80) == nil)
    }

    /// The configured upstream is named, at its port: a sidecar on loopback stays reachable,
    /// and its host's other ports do not open to `*` with it.
    @Test func theUpstreamOriginMayBeInternal_AtItsPortOnly() throws {
        let policy = UpstreamTargetPolicy(internalAddressHosts: [], internalAddressOrigins: [("127.0.0.1", 9000)])
        let verdict = policy.verdict(host: "127.0.0.1", addresses: [try Self.address("127.0.0.1")], localAddresses: [])
        #expect(verdict.refusal(port: 9000) == nil)
        #expect(verdict.refusal(port: 9001) == .targetRefused(.internalAddress(address: "127.0.0.1")))
        let other = policy.verdict(host: "localhost", addresses: [try Self.address("127.0.0.1")], localAddresses: [])
        #expect(other.refusal(port: 9000) != nil)
    }

    @Test func theLoopIsReportedBeforeTheInternalAddress() throws {
        #expect(try Self.refusal(listeners: [("0.0.0.0", 8080)], internalHosts: [], resolvesTo: ["127.0.0.1"], port: 8080)
                == .targetRefused(.ownListener(address: "127.0.0.1:8080")))
        #expect(try Self.refusal(listeners: [("0.0.0.0", 8080)], internalHosts: [], resolvesTo: ["127.0.0.1"], port: 9000)
                == .targetRefused(.internalAddress(address: "127.0.0.1")))
    }

    @Test func aRefusalNeitherMeansUnreachableNorMarksTheRequestSent() {
        let refusal = UpstreamError.targetRefused(.ownListener(address: "127.0.0.1:8080"))
        #expect(!refusal.meansUnreachable)
        #expect(refusal.neverSent)
    }

    @Test func theMachinesInterfaceAddressesIncludeLoopback() {
        #expect(IPAddress.localInterfaceAddresses().contains(.v4(0x7F00_0001)))
    }
}

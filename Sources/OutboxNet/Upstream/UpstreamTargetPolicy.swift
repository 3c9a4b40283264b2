import OutboxModel

/// The addresses the pool refuses to connect to (SPEC §3), as plain values the proxy hands
/// it: Outbox's own listeners, whatever name resolves to them (a forwarding loop, answered
/// `508`), and, when `listen` is not loopback, loopback, link-local and unspecified addresses
/// for hosts that `allowedHosts` admits by a wildcard only (squid's `deny to_localhost`,
/// answered `403`).
///
/// The pool applies it to *resolved* addresses, once per resolution (``verdict(host:addresses:localAddresses:)``,
/// cached with the addresses), so `127.1`, `0x7f.1`, `localhost` and a name rebound to
/// 127.0.0.1 are all seen as what they reach; a connection taken from the pool was checked
/// when it was made. Every upstream connection passes here: forwards, tunnels, replays and
/// probes with `probePath`.
package struct UpstreamTargetPolicy: Sendable {
    /// The listeners' bound addresses and ports. One on 0.0.0.0 or `::` stands for every
    /// local address at its port (0.0.0.0 for the IPv4 ones only).
    package var listeners: [(address: IPAddress, port: Int)]
    /// The hosts that may resolve to loopback, link-local or unspecified addresses (in
    /// `HostSyntax.matchingForm`); nil: every host may (a loopback `listen`, where every
    /// client is local anyway).
    package var internalAddressHosts: Set<String>?
    /// Host and port pairs that may resolve to internal addresses whatever
    /// `internalAddressHosts` says: the configured upstream (on loopback for a sidecar), at its
    /// port only, so that naming it does not open its host's other ports to `*`.
    package var internalAddressOrigins: [(host: String, port: Int)]

    package init(listeners: [SocketAddress] = [], internalAddressHosts: Set<String>? = nil,
                 internalAddressOrigins: [(host: String, port: Int)] = []) {
        self.listeners = listeners.compactMap { listener in listener.ip.map { ($0, listener.port) } }
        self.internalAddressHosts = internalAddressHosts
        self.internalAddressOrigins = internalAddressOrigins.map { (HostSyntax.matchingForm($0.host), $0.port) }
    }

    /// Whether a verdict needs the machine's interface addresses: only a wildcard listener
    /// accepts connections for them.
    package var needsLocalAddresses: Bool {
        listeners.contains { $0.address.isUnspecified }
    }

    /// Whether nothing is ever refused (no listeners known, every address allowed).
    var refusesNothing: Bool { listeners.isEmpty && internalAddressHosts == nil }

    /// What connecting to `host` at `addresses` (all of them: connections may go to any) means,
    /// for every port. `localAddresses`: the machine's interface addresses, needed only when
    /// ``needsLocalAddresses``.
    package func verdict(host: String, addresses: [SocketAddress], localAddresses: [IPAddress]) -> Verdict {
        var verdict = Verdict()
        let name = HostSyntax.matchingForm(host)
        let exempt = internalAddressHosts.map { $0.contains(name) } ?? true
        verdict.internalAllowedPorts = internalAddressOrigins.filter { $0.host == name }.map(\.port)
        for candidate in addresses {
            guard let ip = candidate.ip else { continue }
            for listener in listeners where Self.reaches(ip, listener.address, localAddresses: localAddresses) {
                if !verdict.listeners.contains(where: { $0.port == listener.port }) {
                    verdict.listeners.append((listener.port, ip.description))
                }
            }
            if !exempt, verdict.internalAddress == nil, ip.isInternal {
                verdict.internalAddress = ip.description
            }
        }
        return verdict
    }

    /// Whether a connection to `target` reaches a socket listening on `listener` (same port).
    /// Conservative where the kernel's choice is not obvious: a target of 0.0.0.0 or `::` is
    /// this host, so it counts as reaching every listener.
    static func reaches(_ target: IPAddress, _ listener: IPAddress, localAddresses: [IPAddress]) -> Bool {
        if target == listener || target.isUnspecified { return true }
        guard listener.isUnspecified else { return false }
        // 0.0.0.0 takes IPv4 only; `::` (dual-stack, Linux's default) both families.
        if case .v4 = listener, case .v6 = target { return false }
        return target.isLoopback || localAddresses.contains(target)
    }

    /// The outcome for one host's resolution, for any port: which listener ports its addresses
    /// reach, and the internal address it may not reach, if any.
    package struct Verdict: Sendable {
        /// The ports of listeners that an address of the host reaches, with that address.
        var listeners: [(port: Int, address: String)] = []
        /// An internal address the host resolved to and may not reach (but at
        /// `internalAllowedPorts`).
        var internalAddress: String?
        var internalAllowedPorts: [Int] = []

        /// A verdict that refuses nothing.
        package static let allowed = Verdict()

        /// Why a connection to the host at `port` is refused; nil when it is not. The loop is
        /// answered first: it is the more specific reason.
        package func refusal(port: Int) -> UpstreamError? {
            if let match = listeners.first(where: { $0.port == port }) {
                return .targetRefused(.ownListener(address: "\(HostSyntax.bracketed(match.address)):\(port)"))
            }
            if let internalAddress, !internalAllowedPorts.contains(port) {
                return .targetRefused(.internalAddress(address: internalAddress))
            }
            return nil
        }
    }
}

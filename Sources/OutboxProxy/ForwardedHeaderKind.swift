import OutboxHTTP

/// What the proxy does with one header field, decided from the name's bytes without making a
/// String: the rewrite of every forwarded head runs this once per field.
enum ForwardedHeaderKind {
    case keep
    case hopByHop
    case host
    case expect
    case forwardedFor
    case forwardedProto
    case forwardedHost
    /// Forwarded as one field, however many identical values came. Never hop-by-hop, even
    /// when `Connection` names it: it frames the body this hop carries, and dropping it would
    /// leave the next hop reading that body as the next message.
    case contentLength
    /// `Outbox-*` control headers: read by the proxy, never forwarded (they steer this hop only).
    case control

    private static func bytes(_ text: StaticString) -> [UInt8] {
        Array(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    private static let teName = bytes("te")
    private static let hostName = bytes("host")
    private static let expectName = bytes("expect")
    private static let trailerName = bytes("trailer")
    private static let upgradeName = bytes("upgrade")
    private static let connectionName = bytes("connection")
    private static let keepAliveName = bytes("keep-alive")
    private static let xForwardedForName = bytes("x-forwarded-for")
    private static let proxyConnectionName = bytes("proxy-connection")
    private static let xForwardedHostName = bytes("x-forwarded-host")
    private static let xForwardedProtoName = bytes("x-forwarded-proto")
    private static let transferEncodingName = bytes("transfer-encoding")
    private static let proxyAuthenticateName = bytes("proxy-authenticate")
    private static let proxyAuthorizationName = bytes("proxy-authorization")
    private static let outboxTagName = bytes("outbox-tag")
    private static let outboxModeName = bytes("outbox-mode")
    private static let outboxPriorityName = bytes("outbox-priority")
    private static let outboxDependsOnName = bytes("outbox-depends-on")
    private static let outboxAttemptName = bytes("outbox-attempt")
    private static let outboxOrderingKeyName = bytes("outbox-ordering-key")
    private static let contentLengthName = bytes("content-length")

    /// The field names a message's `Connection` fields list: hop-by-hop for that message only
    /// (RFC 9110 §7.6.1). Looked up in the message's own bytes, so a head with `Connection:
    /// keep-alive` costs no String and no array per rewrite.
    struct ConnectionOptions {
        private let headers: HTTPHeaders
        /// `Connection` lists an option besides `keep-alive`.
        private let listsMoreThanKeepAlive: Bool

        init(of headers: HTTPHeaders) {
            self.headers = headers
            // `keep-alive`, the one option most heads carry, names a field that is hop-by-hop
            // by name already: a head listing nothing else needs no lookup per field.
            listsMoreThanKeepAlive = connectionName.withUnsafeBufferPointer { connection in
                keepAliveName.withUnsafeBufferPointer { keepAlive in
                    headers.containsToken(in: connection) { !HTTPByte.equalsIgnoringCase($0, keepAlive) }
                }
            }
        }

        /// Whether `name` (any case) is listed.
        func lists(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
            listsMoreThanKeepAlive && connectionName.withUnsafeBufferPointer { headers.containsToken(name, in: $0) }
        }
    }

    /// Classifies a field name (any case); a name that `connection` lists is hop-by-hop.
    static func classify(_ name: UnsafeBufferPointer<UInt8>, connection: ConnectionOptions) -> ForwardedHeaderKind {
        func matches(_ candidate: [UInt8]) -> Bool {
            candidate.withUnsafeBufferPointer { HTTPByte.equalsIgnoringCase(name, $0) }
        }
        let kind: ForwardedHeaderKind
        switch name.count {
        case 2: kind = matches(teName) ? .hopByHop : .keep
        case 4: kind = matches(hostName) ? .host : .keep
        case 6: kind = matches(expectName) ? .expect : .keep
        case 7: kind = matches(trailerName) || matches(upgradeName) ? .hopByHop : .keep
        case 10: kind = matches(connectionName) || matches(keepAliveName) ? .hopByHop : matches(outboxTagName) ? .control : .keep
        case 11: kind = matches(outboxModeName) ? .control : .keep
        case 14: kind = matches(contentLengthName) ? .contentLength : matches(outboxAttemptName) ? .control : .keep
        case 15: kind = matches(xForwardedForName) ? .forwardedFor : matches(outboxPriorityName) ? .control : .keep
        case 16: kind = matches(proxyConnectionName) ? .hopByHop : matches(xForwardedHostName) ? .forwardedHost : .keep
        case 17:
            kind = matches(transferEncodingName) ? .hopByHop : matches(xForwardedProtoName) ? .forwardedProto
                : matches(outboxDependsOnName) ? .control : .keep
        case 18: kind = matches(proxyAuthenticateName) ? .hopByHop : .keep
        case 19: kind = matches(proxyAuthorizationName) ? .hopByHop : matches(outboxOrderingKeyName) ? .control : .keep
        default: kind = .keep
        }
        if kind == .keep && connection.lists(name) { return .hopByHop }
        return kind
    }
}

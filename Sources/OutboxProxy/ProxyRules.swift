import OutboxConfig
import OutboxHTTP
import OutboxModel

/// Where a request goes, decided from its target before anything is forwarded.
enum Route: Equatable {
    /// Forward to `origin` with origin-form `target`.
    case origin(Origin, target: String, forwardMode: Bool)
    /// `CONNECT host:port`.
    case tunnel(host: String, port: Int)
}

/// The proxy's header and routing rules as pure functions: what is hop-by-hop, which forwarding
/// headers are added, where a request target points. Tests drive them with plain values.
package enum ProxyRules {
    /// The `Via` entry Outbox adds (RFC 9110 §7.6.3), as written into forwarded heads.
    static let viaValue: StaticString = "1.1 outbox"
    package static var via: String { viaValue.description }

    /// Routes a request; errors carry the status the client gets. `intercepted` is the origin
    /// of the intercepted tunnel the request came through, if it did. `upstreamOrigin` is
    /// `upstream`'s origin made once ahead (made here when nil): building one per request
    /// lowercases the host and formats its authority again.
    static func route(_ head: HTTPRequestHead, upstream: UpstreamURL?, upstreamOrigin: Origin? = nil,
                      forwardProxy: OutboxConfig.ForwardProxy, intercepted: Origin? = nil) -> Result<Route, ProxyError> {
        if let intercepted { return route(head, inTunnelTo: intercepted) }
        // A request that already passed through Outbox several times is going round in
        // circles (an absolute URL naming the proxy itself): stop it before it eats every
        // connection. Chains of up to three distinct Outbox hops still pass.
        if head.headers.contains("Via"), outboxHops(in: head.headers) >= 3 {
            return .failure(.loopDetected)
        }
        if head.method == "CONNECT" {
            guard forwardProxy.enabled else { return .failure(.forbidden("forward proxying is disabled")) }
            guard let (host, port) = Origin.parseAuthority(head.target, defaultPort: nil) else {
                return .failure(.badRequest("CONNECT needs host:port, got \(head.target)"))
            }
            guard forwardProxy.connectPorts.contains(port) else {
                return .failure(.forbidden("CONNECT to port \(port) is not allowed (forwardProxy.connectPorts)"))
            }
            guard forwardProxy.allowsHost(host) else {
                return .failure(.forbidden("host \(host) is not in forwardProxy.allowedHosts"))
            }
            return .success(.tunnel(host: host, port: port))
        }
        if head.target == "*" && head.method != "OPTIONS" {
            // asterisk-form is for OPTIONS only (RFC 9112 §3.2.4).
            return .failure(.badRequest("request target * is only valid for OPTIONS"))
        }
        if head.target.hasPrefix("/") || head.target == "*" {
            guard let upstream else {
                return .failure(.noUpstream)
            }
            let target = head.target == "*" ? (upstream.basePath.isEmpty ? "*" : upstream.basePath) : upstream.basePath + head.target
            return .success(.origin(upstreamOrigin ?? upstream.origin, target: target, forwardMode: false))
        }
        guard let (origin, target) = Origin.parseAbsolute(head.target) else {
            return .failure(.badRequest("request target is not origin-form or an http(s) URL: \(head.target)"))
        }
        guard forwardProxy.enabled else { return .failure(.forbidden("forward proxying is disabled")) }
        guard forwardProxy.allowsHost(origin.host) else {
            return .failure(.forbidden("host \(origin.host) is not in forwardProxy.allowedHosts"))
        }
        return .success(.origin(origin, target: target, forwardMode: true))
    }

    /// Inside an intercepted tunnel every request is for the tunnel's origin: the client checked
    /// our certificate for that name only, so a `Host` (or absolute URL) naming another
    /// authority must not be sent anywhere else (RFC 9110 §15.5.20: 421).
    private static func route(_ head: HTTPRequestHead, inTunnelTo origin: Origin) -> Result<Route, ProxyError> {
        if head.method == "CONNECT" {
            return .failure(.badRequest("CONNECT inside an intercepted tunnel"))
        }
        let named: (host: String, port: Int)?
        let target: String
        if head.target.hasPrefix("/") || head.target == "*" {
            // The parser guarantees exactly one Host on HTTP/1.1; HTTP/1.0 may omit it.
            named = head.headers.first("Host").flatMap { Origin.parseAuthority($0, defaultPort: 443) }
                ?? (host: origin.host, port: origin.port)
            target = head.target
        } else if let (absolute, path) = Origin.parseAbsolute(head.target), absolute.scheme == .https {
            named = (absolute.host, absolute.port)
            target = path
        } else {
            named = nil
            target = head.target
        }
        guard let named, named.host.lowercased() == origin.host.lowercased(), named.port == origin.port else {
            return .failure(.misdirected("this tunnel serves \(origin.authority) only, not \(head.headers.first("Host") ?? head.target)"))
        }
        return .success(.origin(origin, target: target, forwardMode: true))
    }

    /// How many `Via` entries name Outbox (`1.1 outbox`).
    static func outboxHops(in headers: HTTPHeaders) -> Int {
        headers.values("Via").reduce(0) { count, value in
            count + value.split(separator: ",").filter {
                $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first?.lowercased() == "outbox"
            }.count
        }
    }

    /// The request head sent upstream: origin-form target, `Host` first, hop-by-hop and
    /// `Expect` removed (the proxy answers `100 Continue` itself), `Via` and `X-Forwarded-*`
    /// added, body framing re-declared for the upstream hop (at most one `Content-Length`).
    /// Works on the stored bytes: no String per field.
    ///
    /// `X-Forwarded-Host` is the authority the client asked for: the one in an absolute-form
    /// target (forward mode) even when the client's `Host` field says something else (a proxy
    /// ignores the received `Host` for an absolute-form target, RFC 9112 §3.2.2), else `Host`.
    /// `clientScheme` is what the client spoke to us: `https` inside an intercepted tunnel.
    /// The fields are written into `headers`, an empty list whose storage may be reused.
    static func upstreamRequestHead(_ head: HTTPRequestHead, origin: Origin, target: String,
                                    clientAddress: String, bodyFraming: HTTPBodyFraming,
                                    clientScheme: String = "http",
                                    reusing headers: consuming HTTPHeaders = HTTPHeaders()) -> HTTPRequestHead {
        headers.reserveCapacity(bytes: head.headers.byteCount + 160)
        headers.add(field: "Host", value: origin.authority)
        let connection = ForwardedHeaderKind.ConnectionOptions(of: head.headers)
        var forwardedFor: [UInt8] = []
        var originalHost: Range<Int>?
        var contentLengthWritten = false
        let source = head.headers
        source.storage.withUnsafeBufferPointer { bytes in
            for field in source.fields {
                let name = UnsafeBufferPointer(rebasing: bytes[field.nameRange])
                let value = UnsafeBufferPointer(rebasing: bytes[field.valueRange])
                switch ForwardedHeaderKind.classify(name, connection: connection) {
                case .keep:
                    headers.appendValidated(name: name, value: value)
                case .contentLength:
                    appendContentLength(name: name, value: value, framing: bodyFraming, of: source,
                                        written: &contentLengthWritten, into: &headers)
                case .host:
                    if originalHost == nil { originalHost = field.valueRange }
                case .forwardedFor:
                    // Appended with ", " to what the client sent, as Go's reverseproxy does.
                    forwardedFor.append(contentsOf: value)
                    forwardedFor.append(contentsOf: [0x2C, 0x20])
                case .hopByHop, .expect, .forwardedProto, .forwardedHost, .control:
                    break
                }
            }
        }
        if bodyFraming == .chunked { headers.add(field: "Transfer-Encoding", value: "chunked") }
        headers.add(field: "Via", value: viaValue)
        if forwardedFor.isEmpty {
            headers.add(field: "X-Forwarded-For", value: clientAddress)
        } else {
            forwardedFor.append(contentsOf: clientAddress.utf8)
            forwardedFor.withUnsafeBufferPointer { headers.add(field: "X-Forwarded-For", value: $0) }
        }
        headers.add(field: "X-Forwarded-Proto", value: clientScheme)
        // An origin-form target (the reverse proxy's every request) names no authority.
        if head.target.utf8.first != UInt8(ascii: "/"), let (_, authority) = Origin.absoluteAuthority(head.target) {
            headers.add(field: "X-Forwarded-Host", value: String(authority))
        } else if let originalHost {
            source.storage.withUnsafeBufferPointer { headers.add(field: "X-Forwarded-Host", value: UnsafeBufferPointer(rebasing: $0[originalHost])) }
        }
        return HTTPRequestHead(method: head.method, target: target, version: .http1_1, headers: headers)
    }

    /// The response head sent to the client: hop-by-hop removed, at most one `Content-Length`,
    /// `Via` added; the caller adds framing and `Connection` for the client hop. `bodyFraming`
    /// is how the response parser framed the body. The fields are written into `headers`, an
    /// empty list whose storage may be reused.
    static func clientResponseHead(_ head: HTTPResponseHead, bodyFraming: HTTPBodyFraming,
                                   reusing headers: consuming HTTPHeaders = HTTPHeaders()) -> HTTPResponseHead {
        headers.reserveCapacity(bytes: head.headers.byteCount + 64)
        let connection = ForwardedHeaderKind.ConnectionOptions(of: head.headers)
        var contentLengthWritten = false
        let source = head.headers
        source.storage.withUnsafeBufferPointer { bytes in
            for field in source.fields {
                let name = UnsafeBufferPointer(rebasing: bytes[field.nameRange])
                let value = UnsafeBufferPointer(rebasing: bytes[field.valueRange])
                switch ForwardedHeaderKind.classify(name, connection: connection) {
                case .hopByHop:
                    continue
                case .contentLength:
                    appendContentLength(name: name, value: value, framing: bodyFraming, of: source,
                                        written: &contentLengthWritten, into: &headers)
                default:
                    headers.appendValidated(name: name, value: value)
                }
            }
        }
        headers.add(field: "Via", value: viaValue)
        return HTTPResponseHead(version: .http1_1, status: head.status, reason: head.reason, headers: headers)
    }

    /// Forwards a message's `Content-Length` fields as one, in the place of the first: several
    /// identical values (two fields, or `5, 5`) would leave the next hop to pick its own
    /// reading, and RFC 9112 §6.3 lets a recipient replace them with one value. Called for
    /// every `Content-Length` field; `written` says the one field is out and the rest go.
    /// A value of plain digits is copied as it came (the common single field: no extra work).
    private static func appendContentLength(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>,
                                            framing: HTTPBodyFraming, of source: HTTPHeaders,
                                            written: inout Bool, into headers: inout HTTPHeaders) {
        guard !written else { return }
        written = true
        let length: Int
        if case .contentLength(let framed) = framing {
            // The parser checked that every value is this one.
            length = framed
        } else {
            // A body the length does not frame (a HEAD or 304 response): its values were never
            // checked, so check them now; differing or malformed ones are not passed on.
            let fields = HTTPFramingRules.scan(source)
            guard fields.contentLengthIsValid, let scanned = fields.contentLength else { return }
            length = scanned
        }
        if !value.isEmpty && value.allSatisfy(HTTPByte.isDigit) {
            headers.appendValidated(name: name, value: value)
        } else {
            Array(String(length).utf8).withUnsafeBufferPointer { headers.appendValidated(name: name, value: $0) }
        }
    }
}

/// A scriptable origin and the proxy in front of it, reached over plain http or over TLS: for
/// `.https` the `TestUpstream` sits behind a `TLSFront` and the proxy's upstream is the
/// front's `https://` URL, so one test body checks that both schemes pass the same bytes.
/// The proxy's config trusts the test CA (`tls.caFile`) either way.
struct ProxiedOrigin {
    enum Scheme: String, CaseIterable, Sendable, CustomStringConvertible {
        case http
        case https

        var description: String { rawValue }
    }

    let backend: TestUpstream
    /// The TLS front, nil for `.http`.
    let front: TLSFront?
    let outbox: OutboxProcess

    /// `host:port` of the origin the proxy talks to: what it must send as `Host`.
    var authority: String { front?.authority ?? backend.authority }

    /// The proxy's upstream, and the origin's name in `/admin/status`.
    var baseURL: String { front?.baseURL ?? backend.baseURL }

    /// Starts the origin (answering with `handler`), its front for `.https` (presenting
    /// `identities`, requiring a client certificate from `clientCA` when given), and the proxy
    /// with `TLSFixtures.config(tls:other:)`.
    static func start(_ scheme: Scheme = .https, presenting identities: [TLSFixtures.Identity] = [.server],
                      clientCA: String? = nil, tls: String = "", config other: String = "",
                      handler: @escaping TestUpstream.Handler = TestUpstream.answersOK) async throws -> ProxiedOrigin {
        let backend = try TestUpstream(handler: handler)
        let front = scheme == .https
            ? try await TLSFront.start(relayingTo: backend, presenting: identities, clientCA: clientCA) : nil
        let outbox = try await OutboxProcess.start(upstream: front?.baseURL ?? backend.baseURL,
                                                   config: TLSFixtures.config(tls: tls, other: other))
        return ProxiedOrigin(backend: backend, front: front, outbox: outbox)
    }

    /// The proxy, the front and what the origin received, for failure messages.
    var diagnostics: String {
        "\(outbox)\n\(front.map(\.description) ?? "no TLS front")\norigin got: \(backend.requests.map { "\($0.method) \($0.target)" })"
    }
}

import COpenSSL
import CTLSShim
import Synchronization

/// Mints the server certificates Outbox presents on intercepted tunnels: one per SNI name or
/// IP address, signed by the interception CA, valid 30 days (from an hour ago, and never past
/// the CA's own end), subjectAltName the name, extendedKeyUsage serverAuth. All leaves share
/// one EC P-256 key made when the issuer is (as mitmproxy does), so minting is a signature,
/// not a key generation: cheap enough for an event loop.
///
/// Each name's `TLSContext` is cached, at most `capacity` of them; when a new name would
/// exceed it, the one used longest ago goes (LRU). Safe to call from any thread: the cache is
/// behind a lock, and minting happens outside it (two loops asking for one new name at once
/// may both mint; one result is kept).
package final class LeafCertificateIssuer: Sendable {
    package static let defaultCapacity = 1000
    static let lifetimeSeconds = 30 * 86_400

    /// The key every leaf carries, freed with the issuer.
    private final class LeafKey: @unchecked Sendable {
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
        deinit { EVP_PKEY_free(pointer) }
    }

    private struct Cache {
        var entries: [CertificateName: (context: TLSContext, lastUse: UInt64)] = [:]
        var clock: UInt64 = 0
    }

    package let authority: InterceptionCA
    package let capacity: Int
    private let leafKey: LeafKey
    private let cache = Mutex(Cache())
    /// Answers every ClientHello with `unrecognized_name`; holds no certificate.
    private let refusal: TLSContext

    package init(authority: InterceptionCA, capacity: Int = defaultCapacity) throws(TLSError) {
        precondition(capacity > 0, "a leaf cache holds at least one name")
        ERR_clear_error()
        guard let key = ctlsshim_ec_p256_leaf_key() else { throw TLSError.fromErrorQueue("cannot make the leaf key") }
        self.authority = authority
        self.capacity = capacity
        leafKey = LeafKey(key)
        refusal = try TLSContext.refusingEveryServerName()
    }

    /// How many names have a cached context.
    package var cachedCount: Int { cache.withLock { $0.entries.count } }

    /// The server context for `host` (an SNI name or `CONNECT` host, see `CertificateName`).
    package func context(forHost host: String) throws(TLSError) -> TLSContext {
        guard let name = CertificateName(host) else {
            throw TLSError("cannot mint a certificate for \(host): not a host name or IP address")
        }
        return try context(for: name)
    }

    /// The server context for `name`: cached, or minted and cached.
    package func context(for name: CertificateName) throws(TLSError) -> TLSContext {
        let cached: TLSContext? = cache.withLock { cache in
            guard let entry = cache.entries[name] else { return nil }
            cache.clock &+= 1
            cache.entries[name] = (entry.context, cache.clock)
            return entry.context
        }
        if let cached { return cached }
        let minted = try mint(name)
        return cache.withLock { cache in
            cache.clock &+= 1
            if let raced = cache.entries[name] {
                cache.entries[name] = (raced.context, cache.clock)
                return raced.context
            }
            if cache.entries.count >= capacity, let oldest = cache.entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
                // A scan of at most `capacity` entries, only when a new name was just minted
                // (a signature costs far more).
                cache.entries[oldest] = nil
            }
            cache.entries[name] = (minted, cache.clock)
            return minted
        }
    }

    /// The TLS records that refuse `clientHello` (a complete one, as ``ClientHelloPeek``
    /// found it) with the fatal alert `unrecognized_name` (RFC 6066 §3): what a client gets
    /// whose SNI names a host no leaf is made for. OpenSSL writes them, as a server with no
    /// certificate; nothing is minted or cached. Empty when OpenSSL cannot even start the
    /// connection (the caller closes it either way).
    package func unrecognizedNameAlert(answering clientHello: UnsafeRawBufferPointer) -> [UInt8] {
        guard let engine = try? TLSEngine(serverOf: refusal) else { return [] }
        engine.feed(clientHello)
        _ = engine.handshake()  // fails by design, queuing the alert
        return engine.drainOutput()
    }

    /// The PEM text of the certificate `context` presents (for `openssl verify` and logs).
    package static func certificatePEM(of context: TLSContext) -> [UInt8]? {
        guard let certificate = SSL_CTX_get0_certificate(context.context) else { return nil }
        return PEM.encode(certificate: certificate)
    }

    private func mint(_ name: CertificateName) throws(TLSError) -> TLSContext {
        ERR_clear_error()
        let lifetime = min(Self.lifetimeSeconds, authority.secondsLeft)
        let made: OpaquePointer?
        switch name {
        case .dns(let host):
            made = ctlsshim_leaf_certificate(authority.certificate, authority.key, leafKey.pointer, host, nil, 0,
                                             -InterceptionCA.clockSkewSeconds, lifetime)
        case .ip(let bytes):
            made = ctlsshim_leaf_certificate(authority.certificate, authority.key, leafKey.pointer, nil, bytes, bytes.count,
                                             -InterceptionCA.clockSkewSeconds, lifetime)
        }
        guard let certificate = made else {
            throw TLSError("cannot mint a certificate for \(name): \(TLSError.fromErrorQueue("signing failed").reason)")
        }
        defer { X509_free(certificate) }  // the context holds its own reference
        return try TLSContext(serverCertificate: certificate, key: leafKey.pointer)
    }
}

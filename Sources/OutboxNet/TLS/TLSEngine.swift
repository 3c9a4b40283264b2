import COpenSSL
import CTLSShim
import Glibc

/// Why a TLS handshake or record failed, as one line for logs and `lastError`: a refused
/// certificate reads `certificate verify failed: <OpenSSL's reason>` (e.g. `self-signed
/// certificate`, `hostname mismatch`), anything else OpenSSL's reason for the first error it
/// queued (e.g. `tlsv1 alert unknown ca`, `wrong version number`).
package struct TLSError: Error, Equatable, Sendable, CustomStringConvertible {
    package let reason: String

    package init(_ reason: String) {
        self.reason = reason
    }

    package var description: String { reason }

    /// Takes (and clears) this thread's OpenSSL error queue: the first error is the cause,
    /// later ones are consequences. `what` names the call when the queue is empty.
    static func fromErrorQueue(_ what: String) -> TLSError {
        let first = ERR_get_error()
        ERR_clear_error()
        guard first != 0 else { return TLSError(what) }
        if let reason = ctlsshim_error_reason(first) { return TLSError(String(cString: reason)) }
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(first, &text, text.count)
        return TLSError(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
}

/// Settings shared by every TLS connection of one side: the trust store and verification
/// switch for clients, the certificate and key for servers. It owns an `SSL_CTX`, which
/// OpenSSL allows connections on several threads to share once it is configured (it is never
/// changed after `init`), hence `@unchecked Sendable`.
package final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer
    package let isServer: Bool
    package let verifiesPeer: Bool

    /// A client context: TLS 1.2 minimum, the system trust store plus `caFile` (a PEM
    /// bundle), the host checked against the certificate's subjectAltName only (never its
    /// CN, RFC 9525), and with `verify: false` no certificate check at all. `certificate`
    /// (chain and key PEM) is presented to servers that ask for one (mTLS).
    package convenience init(clientVerifying verify: Bool = true, caFile: String? = nil,
                             certificate: (chainPEM: [UInt8], keyPEM: [UInt8])? = nil) throws(TLSError) {
        try self.init(method: TLS_client_method(), isServer: false, verifiesPeer: verify)
        ctlsshim_ctx_enable_client_sessions(context)
        if let certificate { try use(chainPEM: certificate.chainPEM, keyPEM: certificate.keyPEM) }
        if verify {
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            ctlsshim_ctx_match_names_in_san_only(context)
            guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                throw TLSError.fromErrorQueue("cannot load the system trust store")
            }
            if let caFile { try loadVerifyLocations(caFile) }
        } else {
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        }
    }

    /// A server context presenting `certificatePEM` (the leaf first, then any intermediates)
    /// with `keyPEM`; it selects ALPN `http/1.1` when offered. With `clientCAFile` it requires
    /// a client certificate signed by a CA in that PEM bundle, otherwise it asks for none.
    package convenience init(serverCertificatePEM certificatePEM: [UInt8], keyPEM: [UInt8],
                             clientCAFile: String? = nil) throws(TLSError) {
        try self.init(method: TLS_server_method(), isServer: true, verifiesPeer: clientCAFile != nil)
        try use(chainPEM: certificatePEM, keyPEM: keyPEM)
        ctlsshim_ctx_select_alpn_http11(context)
        if let clientCAFile {
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
            try loadVerifyLocations(clientCAFile)
        }
    }

    private func loadVerifyLocations(_ file: String) throws(TLSError) {
        guard SSL_CTX_load_verify_locations(context, file, nil) == 1 else {
            throw TLSError("cannot load CA file \(file): \(TLSError.fromErrorQueue("unreadable").reason)")
        }
    }

    private func use(chainPEM certificatePEM: [UInt8], keyPEM: [UInt8]) throws(TLSError) {
        let loaded = certificatePEM.withUnsafeBufferPointer { certificates in
            keyPEM.withUnsafeBufferPointer { key in
                certificates.withMemoryRebound(to: CChar.self) { certificates in
                    key.withMemoryRebound(to: CChar.self) { key in
                        ctlsshim_ctx_use_pem(context, certificates.baseAddress, certificates.count, key.baseAddress, key.count)
                    }
                }
            }
        }
        guard loaded == 1 else { throw TLSError("cannot use the certificate and key: \(TLSError.fromErrorQueue("unreadable").reason)") }
    }

    init(method: OpaquePointer?, isServer: Bool, verifiesPeer: Bool) throws(TLSError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(method) else { throw TLSError.fromErrorQueue("cannot create a TLS context") }
        self.context = context
        self.isServer = isServer
        self.verifiesPeer = verifiesPeer
        guard ctlsshim_ctx_configure(context) == 1 else { throw TLSError.fromErrorQueue("cannot configure TLS 1.2 and its suites") }
    }

    deinit {
        SSL_CTX_free(context)
    }
}

/// A client session an origin handed out, to resume the next connection to it with a short
/// handshake. Owns one reference to the `SSL_SESSION`; one event loop's cache owns it.
package final class TLSSession {
    let session: OpaquePointer

    init(_ session: OpaquePointer) {
        self.session = session
    }

    deinit {
        SSL_SESSION_free(session)
    }
}

/// One TLS connection as a state machine over bytes, with no socket and no thread: the owner
/// (an event loop) `feed`s the ciphertext it reads, sends what `drainOutput` returns, and asks
/// `handshake`, `read` and `write` to make progress; a `.wantRead` means "feed me more
/// ciphertext, then call again". Every call may queue output (handshake records, alerts,
/// session tickets), so the owner drains after each. Not thread-safe: one loop owns it.
package final class TLSEngine {
    /// Where a handshake stands after one step. `.wantWrite` is OpenSSL's and kept for
    /// completeness: a memory output never fills, so this engine does not return it today.
    package enum HandshakeResult: Equatable, Sendable {
        case complete
        case wantRead
        case wantWrite
        case failed(TLSError)
    }

    /// What one `read` gave.
    package enum ReadResult: Equatable, Sendable {
        /// `n` plaintext bytes were stored at the start of the buffer.
        case bytes(Int)
        case wantRead
        /// The peer sent close_notify: no more plaintext will come.
        case closed
        case failed(TLSError)
    }

    /// What one `write` did with the plaintext.
    package enum WriteResult: Equatable, Sendable {
        /// All the plaintext was encrypted into the output.
        case written
        /// Not yet (a handshake is in progress): feed ciphertext, then write the same bytes again.
        case wantRead
        case failed(TLSError)
    }

    private let ssl: OpaquePointer
    /// Ciphertext from the peer, which OpenSSL reads; and ciphertext for the peer, which it writes.
    private let input: OpaquePointer
    private let output: OpaquePointer
    private let context: TLSContext  // keeps the SSL_CTX alive as long as the SSL uses it
    private let checksCertificate: Bool

    /// A client connection to `host` (a DNS name, or an IPv4/IPv6 literal, brackets allowed):
    /// SNI is sent for a name only (IP literals are not allowed in SNI), ALPN offers only
    /// `http/1.1`, and when the context verifies, the certificate must match the name or IP.
    package convenience init(clientOf context: TLSContext, host: String) throws(TLSError) {
        precondition(!context.isServer, "a client engine needs a client context")
        try self.init(context: context)
        SSL_set_connect_state(ssl)
        guard ctlsshim_offer_alpn_http11(ssl) == 1 else { throw TLSError.fromErrorQueue("cannot set ALPN") }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let isIPLiteral = Self.isIPLiteral(bare)
        if !isIPLiteral, ctlsshim_set_server_name(ssl, bare) != 1 {
            throw TLSError("cannot send \(bare) as SNI: \(TLSError.fromErrorQueue("rejected").reason)")
        }
        if context.verifiesPeer {
            let checked = isIPLiteral
                ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), bare)
                : SSL_set1_host(ssl, bare)
            guard checked == 1 else { throw TLSError("cannot check the certificate against \(bare)") }
        }
    }

    /// A server connection presenting the context's certificate.
    package convenience init(serverOf context: TLSContext) throws(TLSError) {
        precondition(context.isServer, "a server engine needs a server context")
        try self.init(context: context)
        SSL_set_accept_state(ssl)
    }

    private init(context: TLSContext) throws(TLSError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context.context) else { throw TLSError.fromErrorQueue("cannot create a TLS connection") }
        guard let input = BIO_new(BIO_s_mem()), let output = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSError.fromErrorQueue("cannot create TLS buffers")
        }
        // An empty input BIO reads as "retry later" (its default), never as EOF: the end of
        // the stream is the owner's to tell. SSL_set_bio hands both BIOs to the SSL.
        SSL_set_bio(ssl, input, output)
        self.ssl = ssl
        self.input = input
        self.output = output
        self.context = context
        self.checksCertificate = context.verifiesPeer
    }

    deinit {
        if let parked = ctlsshim_take_new_session(ssl) { SSL_SESSION_free(parked) }
        SSL_free(ssl)  // frees both BIOs
    }

    /// The newest session the server gave this client connection, taken from it (nil when
    /// none came since the last call): what a later connection to the same origin resumes.
    package func takeNewSession() -> TLSSession? {
        ctlsshim_take_new_session(ssl).map(TLSSession.init)
    }

    /// Offers `session` in the handshake (call before the first `handshake`); the server may
    /// still choose a full handshake.
    package func resume(_ session: TLSSession) {
        SSL_set_session(ssl, session.session)
    }

    /// Whether the completed handshake resumed a session instead of a full key exchange.
    package var resumedSession: Bool { SSL_session_reused(ssl) == 1 }

    /// Whether the completed handshake negotiated TLS 1.3, where a client's handshake is done
    /// before the server has judged the client's certificate: a refusal comes after it, as an
    /// alert in place of the session tickets an accepting server sends.
    package var negotiatedTLS13: Bool { SSL_version(ssl) == TLS1_3_VERSION }

    /// Ciphertext read from the peer.
    package func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    package func feed(_ bytes: UnsafeRawBufferPointer) {
        var rest = bytes
        while !rest.isEmpty {
            // A memory BIO takes all it is given (it grows); Int32 bounds one call.
            let chunk = min(rest.count, Int(Int32.max))
            let written = BIO_write(input, rest.baseAddress, Int32(chunk))
            // Only an allocation failure stops a memory BIO; the next read then fails the
            // connection on the missing bytes.
            guard written > 0 else { return }
            rest = UnsafeRawBufferPointer(rebasing: rest[Int(written)...])
        }
    }

    /// Ciphertext waiting to be sent to the peer, emptied by this call.
    package func drainOutput() -> [UInt8] {
        let pending = ctlsshim_bio_pending(output)
        guard pending > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: pending) { buffer, count in
            let read = BIO_read(output, buffer.baseAddress, Int32(clamping: pending))
            count = max(0, Int(read))
        }
    }

    /// Moves the ciphertext waiting for the peer to the end of `wire` (no intermediate copy).
    package func drainOutput(appendingTo wire: inout [UInt8]) {
        let pending = ctlsshim_bio_pending(output)
        guard pending > 0 else { return }
        let start = wire.count
        wire.append(contentsOf: repeatElement(0, count: pending))
        let read = wire.withUnsafeMutableBytes { raw in
            BIO_read(output, raw.baseAddress! + start, Int32(clamping: pending))
        }
        wire.removeLast(pending - max(0, Int(read)))
    }

    /// True when ciphertext is waiting in `drainOutput`.
    package var hasOutput: Bool { ctlsshim_bio_pending(output) > 0 }

    package var isHandshakeComplete: Bool { SSL_is_init_finished(ssl) == 1 }

    /// The protocol both sides agreed by ALPN (`http/1.1`), nil when the peer chose none.
    package var alpnProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The host name the client sent by SNI, as a server sees it (nil when none was sent):
    /// the name an intercepting server presents a certificate for.
    package var serverName: String? {
        guard let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else { return nil }
        return String(cString: name)
    }

    package func handshake() -> HandshakeResult {
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 { return .complete }
        switch SSL_get_error(ssl, rc) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        default: return .failed(failure("handshake failed"))
        }
    }

    package func write(_ plaintext: [UInt8]) -> WriteResult {
        plaintext.withUnsafeBytes { write($0) }
    }

    package func write(_ plaintext: UnsafeRawBufferPointer) -> WriteResult {
        var rest = plaintext
        while !rest.isEmpty {
            ERR_clear_error()
            let rc = SSL_write(ssl, rest.baseAddress, Int32(clamping: rest.count))
            if rc > 0 {
                rest = UnsafeRawBufferPointer(rebasing: rest[Int(rc)...])
                continue
            }
            switch SSL_get_error(ssl, rc) {
            case SSL_ERROR_WANT_READ: return .wantRead
            default: return .failed(failure("write failed"))
            }
        }
        return .written
    }

    /// Decrypts what the fed ciphertext holds, up to `buffer.count` bytes, into the start of `buffer`.
    package func read(into buffer: inout [UInt8]) -> ReadResult {
        buffer.withUnsafeMutableBytes { read(into: $0) }
    }

    package func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        guard !buffer.isEmpty else { return .bytes(0) }
        ERR_clear_error()
        let rc = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        if rc > 0 { return .bytes(Int(rc)) }
        switch SSL_get_error(ssl, rc) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return .wantRead
        case SSL_ERROR_ZERO_RETURN: return .closed
        default: return .failed(failure("read failed"))
        }
    }

    /// Queues close_notify for the peer (drain it, then close the socket). True when the
    /// peer's close_notify has also been seen.
    @discardableResult
    package func shutdown() -> Bool {
        ERR_clear_error()
        let rc = SSL_shutdown(ssl)
        ERR_clear_error()
        return rc == 1
    }

    /// A refused certificate is told by the verify result (the ERR queue then only says
    /// "certificate verify failed" without why); anything else by the ERR queue.
    private func failure(_ what: String) -> TLSError {
        if checksCertificate {
            let result = SSL_get_verify_result(ssl)
            if result != X509_V_OK, let reason = X509_verify_cert_error_string(result) {
                ERR_clear_error()
                return TLSError("certificate verify failed: \(String(cString: reason))")
            }
        }
        return TLSError.fromErrorQueue(what)
    }

    private static func isIPLiteral(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}

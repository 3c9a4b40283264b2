import COpenSSL
import CTLSShim

extension TLSContext {
    /// A server context presenting `certificate` (an `X509 *`) with `key` (an `EVP_PKEY *`),
    /// both taken by reference (the caller keeps its own), selecting ALPN `http/1.1`: for
    /// leaves minted in memory, which need no PEM round trip.
    convenience init(serverCertificate certificate: OpaquePointer, key: OpaquePointer) throws(TLSError) {
        try self.init(method: TLS_server_method(), isServer: true, verifiesPeer: false)
        guard SSL_CTX_use_certificate(context, certificate) == 1, SSL_CTX_use_PrivateKey(context, key) == 1 else {
            throw TLSError("cannot use the certificate and key: \(TLSError.fromErrorQueue("rejected").reason)")
        }
        ctlsshim_ctx_select_alpn_http11(context)
    }

    /// A server context that answers every ClientHello with the fatal alert
    /// `unrecognized_name` (RFC 6066 §3) and holds no certificate: the refusal OpenSSL writes
    /// for a client naming a host Outbox makes no leaf for.
    static func refusingEveryServerName() throws(TLSError) -> TLSContext {
        let refusing = try TLSContext(method: TLS_server_method(), isServer: true, verifiesPeer: false)
        ctlsshim_ctx_refuse_every_server_name(refusing.context)
        return refusing
    }
}

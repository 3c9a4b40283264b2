#ifndef OUTBOX_CTLSSHIM_H
#define OUTBOX_CTLSSHIM_H

// Functions for the OpenSSL macros (and callbacks) Swift cannot import. Each returns what the
// OpenSSL call it wraps returns: 1 for success unless said otherwise.
#include <openssl/ssl.h>
#include <stddef.h>
#include "CTLSCertificates.h"

// TLS 1.2 minimum with forward-secret AEAD suites only (ECDHE with AES-GCM or
// ChaCha20-Poly1305; TLS 1.3's suites are OpenSSL's defaults), renegotiation refused,
// SSL_write may be retried with a moved buffer.
int ctlsshim_ctx_configure(SSL_CTX *ctx);

// Client: the peer's host name is matched against its subjectAltName only, never the
// subject's CN (RFC 9525), and without partial wildcards.
void ctlsshim_ctx_match_names_in_san_only(SSL_CTX *ctx);

// Server: every ClientHello is answered with the fatal alert unrecognized_name (RFC 6066 §3),
// before a certificate is looked for, so the context needs none.
void ctlsshim_ctx_refuse_every_server_name(SSL_CTX *ctx);

// SNI: the host name sent in the ClientHello.
int ctlsshim_set_server_name(SSL *ssl, const char *name);

// Client: offer only "http/1.1" by ALPN. Server: select "http/1.1" when the client offers it,
// and no protocol otherwise (the handshake still completes: a client without ALPN is fine).
int ctlsshim_offer_alpn_http11(SSL *ssl);
void ctlsshim_ctx_select_alpn_http11(SSL_CTX *ctx);

// The certificate chain (first PEM block the leaf, the rest intermediates) and private key
// from PEM text in memory, checked to match. 1 on success, 0 with the reason on the ERR queue.
int ctlsshim_ctx_use_pem(SSL_CTX *ctx, const char *certificates, size_t certificates_length,
                         const char *key, size_t key_length);

// An ERR queue code's reason, the text after the last colon of ERR_error_string: a system
// error's strerror text, which ERR_reason_error_string leaves out. NULL when OpenSSL has none.
const char *ctlsshim_error_reason(unsigned long code);

// Bytes waiting in a memory BIO.
size_t ctlsshim_bio_pending(BIO *bio);

// Client session resumption: new sessions are kept on their connection until taken (each
// taken session is the caller's reference, freed with SSL_SESSION_free); NULL when none arrived.
void ctlsshim_ctx_enable_client_sessions(SSL_CTX *ctx);
SSL_SESSION *ctlsshim_take_new_session(SSL *ssl);

#endif

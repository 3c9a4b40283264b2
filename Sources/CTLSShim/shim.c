#include <pthread.h>
#include <string.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include "CTLSShim.h"

static const unsigned char alpn_http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// TLS 1.2 suites: forward-secret AEAD only, ECDHE with AES-GCM or ChaCha20-Poly1305, in
// Mozilla's "intermediate" order, without its finite-field DHE suites (SPEC §7.1 asks for
// ECDHE). No static-RSA key exchange, no CBC. TLS 1.3's suites are set apart
// (SSL_CTX_set_ciphersuites) and stay OpenSSL's defaults, all of them AEAD.
static const char tls12_ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

int ctlsshim_ctx_configure(SSL_CTX *ctx) {
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) return 0;
    if (SSL_CTX_set_cipher_list(ctx, tls12_ciphers) != 1) return 0;
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    return 1;
}

void ctlsshim_ctx_match_names_in_san_only(SSL_CTX *ctx) {
    // OpenSSL's default checks the subject's CN when a certificate has no DNS subjectAltName;
    // RFC 9525 §6.3 forbids that fallback. Partial wildcards (`a*.example.com`) are refused as
    // RFC 9525 §6.3 asks too. The SSL objects made from ctx inherit these flags.
    X509_VERIFY_PARAM_set_hostflags(SSL_CTX_get0_param(ctx),
                                    X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
}

static int refuse_server_name(SSL *ssl, int *alert, void *arg) {
    (void)ssl;
    (void)arg;
    *alert = SSL_AD_UNRECOGNIZED_NAME;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

void ctlsshim_ctx_refuse_every_server_name(SSL_CTX *ctx) {
    SSL_CTX_set_tlsext_servername_callback(ctx, refuse_server_name);
}

int ctlsshim_set_server_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

int ctlsshim_offer_alpn_http11(SSL *ssl) {
    // SSL_set_alpn_protos returns 0 on success, unlike the rest of the API.
    return SSL_set_alpn_protos(ssl, alpn_http11, sizeof alpn_http11) == 0 ? 1 : 0;
}

static int select_http11(SSL *ssl, const unsigned char **out, unsigned char *out_length,
                         const unsigned char *offered, unsigned int offered_length, void *arg) {
    (void)ssl;
    (void)arg;
    unsigned char *selected = NULL;
    if (SSL_select_next_proto(&selected, out_length, alpn_http11, sizeof alpn_http11, offered, offered_length) !=
        OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
}

void ctlsshim_ctx_select_alpn_http11(SSL_CTX *ctx) {
    SSL_CTX_set_alpn_select_cb(ctx, select_http11, NULL);
}

int ctlsshim_ctx_use_pem(SSL_CTX *ctx, const char *certificates, size_t certificates_length,
                         const char *key, size_t key_length) {
    int ok = 0;
    BIO *chain = BIO_new_mem_buf(certificates, (int)certificates_length);
    BIO *key_bio = BIO_new_mem_buf(key, (int)key_length);
    X509 *leaf = NULL;
    EVP_PKEY *private_key = NULL;
    if (chain == NULL || key_bio == NULL) goto done;
    leaf = PEM_read_bio_X509(chain, NULL, NULL, NULL);
    if (leaf == NULL || SSL_CTX_use_certificate(ctx, leaf) != 1) goto done;
    for (;;) {
        X509 *intermediate = PEM_read_bio_X509(chain, NULL, NULL, NULL);
        if (intermediate == NULL) {
            // The end of the text shows as "no start line": not an error.
            unsigned long error = ERR_peek_last_error();
            if (ERR_GET_LIB(error) == ERR_LIB_PEM && ERR_GET_REASON(error) == PEM_R_NO_START_LINE) ERR_clear_error();
            else goto done;
            break;
        }
        if (SSL_CTX_add0_chain_cert(ctx, intermediate) != 1) {  // takes ownership only on success
            X509_free(intermediate);
            goto done;
        }
    }
    private_key = PEM_read_bio_PrivateKey(key_bio, NULL, NULL, NULL);
    if (private_key == NULL || SSL_CTX_use_PrivateKey(ctx, private_key) != 1) goto done;
    ok = SSL_CTX_check_private_key(ctx);
done:
    X509_free(leaf);
    EVP_PKEY_free(private_key);
    BIO_free(chain);
    BIO_free(key_bio);
    return ok;
}

const char *ctlsshim_error_reason(unsigned long code) {
    // glibc's strerror text for a known errno is a constant string.
    if (ERR_SYSTEM_ERROR(code)) return strerror(ERR_GET_REASON(code));
    return ERR_reason_error_string(code);
}

size_t ctlsshim_bio_pending(BIO *bio) {
    return BIO_ctrl_pending(bio);
}

// Client sessions: OpenSSL hands each new session (TLS 1.3 sends them after the handshake, as
// tickets) to this callback; it is parked on the connection until the owner takes it, so the
// owner's cache (one per event loop, no locks) decides what to keep.
static int session_slot = -1;
static pthread_once_t session_slot_once = PTHREAD_ONCE_INIT;

static void make_session_slot(void) {
    session_slot = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

static int park_new_session(SSL *ssl, SSL_SESSION *session) {
    SSL_SESSION *previous = SSL_get_ex_data(ssl, session_slot);
    if (previous != NULL) SSL_SESSION_free(previous);
    SSL_set_ex_data(ssl, session_slot, session);
    return 1;  // the reference is ours now
}

void ctlsshim_ctx_enable_client_sessions(SSL_CTX *ctx) {
    pthread_once(&session_slot_once, make_session_slot);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, park_new_session);
}

SSL_SESSION *ctlsshim_take_new_session(SSL *ssl) {
    if (session_slot < 0) return NULL;
    SSL_SESSION *session = SSL_get_ex_data(ssl, session_slot);
    if (session == NULL) return NULL;
    SSL_set_ex_data(ssl, session_slot, NULL);
    // The parked session is still the connection's own: freeing a connection that did not send
    // close_notify marks it not resumable (OpenSSL's ssl_clear_bad_session). A copy keeps it.
    SSL_SESSION *copy = SSL_SESSION_dup(session);
    SSL_SESSION_free(session);
    return copy;
}

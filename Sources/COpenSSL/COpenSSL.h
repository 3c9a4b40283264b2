#ifndef OUTBOX_COPENSSL_H
#define OUTBOX_COPENSSL_H

// The system OpenSSL 3 (libssl-dev), for TLS on the event loops. Its function-like macros
// are not importable into Swift: CTLSShim wraps the ones the TLS engine needs.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#endif

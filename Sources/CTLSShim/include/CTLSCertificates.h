#ifndef OUTBOX_CTLSCERTIFICATES_H
#define OUTBOX_CTLSCERTIFICATES_H

// Making and reading the certificates of the interception CA: the parts of OpenSSL's X509 API
// that are macros (stacks, EVP_EC_gen) or need C structs. Pointers returned are owned by the
// caller (free them with X509_free, EVP_PKEY_free, NAME_CONSTRAINTS_free); NULL or 0 means
// failure with the reason on the ERR queue.
#include <openssl/x509v3.h>
#include <stddef.h>

// A new EC P-256 key pair.
EVP_PKEY *ctlsshim_ec_p256_key(void);

// The same for the key every leaf shares: a legacy EC_KEY where OpenSSL still has them.
// OpenSSL 3.0 passes a provider key through its encoder framework each time a certificate
// takes its public half (about 0.5 ms, most of a leaf's cost); a legacy key is encoded
// directly, in microseconds.
EVP_PKEY *ctlsshim_ec_p256_leaf_key(void);

// An empty set of name constraints, filled by the two calls below.
NAME_CONSTRAINTS *ctlsshim_name_constraints_new(void);

// Adds a DNS subtree (permitted, or excluded when `excluded` is 1). An empty name is the
// whole DNS name space.
int ctlsshim_name_constraints_add_dns(NAME_CONSTRAINTS *constraints, int excluded, const char *name);

// Adds an IP subtree: `address_and_mask` is the address followed by its mask, 8 bytes for
// IPv4, 32 for IPv6 (RFC 5280 §4.2.1.10).
int ctlsshim_name_constraints_add_ip(NAME_CONSTRAINTS *constraints, int excluded,
                                     const unsigned char *address_and_mask, size_t length);

// How many subtrees of one list there are.
int ctlsshim_name_constraints_count(const NAME_CONSTRAINTS *constraints, int excluded);

// Subtree `index` of one list: 1 for a DNS name, 2 for an IP address and mask, 0 for another
// kind; `data`/`length` point into `constraints` (valid while it lives).
int ctlsshim_name_constraints_entry(const NAME_CONSTRAINTS *constraints, int excluded, int index,
                                    const unsigned char **data, int *length);

// The certificate's nameConstraints extension, NULL when it has none (or it is unreadable:
// then `*present` is 1 anyway). `*critical` tells whether it is marked critical.
NAME_CONSTRAINTS *ctlsshim_certificate_name_constraints(X509 *certificate, int *present, int *critical);

// A self-signed CA certificate for `key`: version 3, a random positive 128-bit serial, valid
// from now + `not_before` to now + `not_after` seconds, subject and issuer
// O=Outbox, CN=`common_name`; basicConstraints critical CA:TRUE pathlen:0, keyUsage critical
// keyCertSign cRLSign, extendedKeyUsage serverAuth, subjectKeyIdentifier, and when
// `constraints` is not NULL a critical nameConstraints extension. Signed with SHA-256.
X509 *ctlsshim_ca_certificate(EVP_PKEY *key, const char *common_name, long not_before, long not_after,
                              NAME_CONSTRAINTS *constraints);

// A server certificate for `key`, signed by `issuer` with `issuer_key`: valid from now +
// `not_before` to now + `not_after` seconds, a random serial, subjectAltName the DNS name
// `dns_name` or (when it is NULL) the IP address of `ip_length` (4 or 16) bytes at `ip`,
// subject O=Outbox plus CN the DNS name (no CN for an address, so that no verifier reads
// the address as a host name),
// basicConstraints CA:FALSE, keyUsage critical digitalSignature, extendedKeyUsage serverAuth,
// subject and authority key identifiers. Signed with SHA-256.
X509 *ctlsshim_leaf_certificate(X509 *issuer, EVP_PKEY *issuer_key, EVP_PKEY *key, const char *dns_name,
                                const unsigned char *ip, size_t ip_length, long not_before, long not_after);

#endif

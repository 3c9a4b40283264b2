// EC_KEY is deprecated since OpenSSL 3.0 but still the fast way to put a key into many
// certificates (ctlsshim_ec_p256_leaf_key); this file opts out of the deprecation warnings.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <string.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include "CTLSCertificates.h"

EVP_PKEY *ctlsshim_ec_p256_key(void) {
    return EVP_EC_gen("P-256");
}

EVP_PKEY *ctlsshim_ec_p256_leaf_key(void) {
#ifdef OPENSSL_NO_DEPRECATED_3_0
    return EVP_EC_gen("P-256");
#else
    EC_KEY *pair = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1);
    EVP_PKEY *key = EVP_PKEY_new();
    if (pair == NULL || key == NULL || EC_KEY_generate_key(pair) != 1 || EVP_PKEY_assign_EC_KEY(key, pair) != 1) {
        EC_KEY_free(pair);
        EVP_PKEY_free(key);
        return NULL;
    }
    return key;
#endif
}

NAME_CONSTRAINTS *ctlsshim_name_constraints_new(void) {
    NAME_CONSTRAINTS *constraints = NAME_CONSTRAINTS_new();
    if (constraints == NULL) return NULL;
    constraints->permittedSubtrees = sk_GENERAL_SUBTREE_new_null();
    constraints->excludedSubtrees = sk_GENERAL_SUBTREE_new_null();
    if (constraints->permittedSubtrees == NULL || constraints->excludedSubtrees == NULL) {
        NAME_CONSTRAINTS_free(constraints);
        return NULL;
    }
    return constraints;
}

// Takes ownership of `name` in every case.
static int add_subtree(NAME_CONSTRAINTS *constraints, int excluded, GENERAL_NAME *name) {
    GENERAL_SUBTREE *subtree = GENERAL_SUBTREE_new();
    if (subtree == NULL) {
        GENERAL_NAME_free(name);
        return 0;
    }
    // GENERAL_SUBTREE_new makes an empty base; the name replaces it.
    GENERAL_NAME_free(subtree->base);
    subtree->base = name;
    STACK_OF(GENERAL_SUBTREE) *list = excluded ? constraints->excludedSubtrees : constraints->permittedSubtrees;
    if (sk_GENERAL_SUBTREE_push(list, subtree) == 0) {
        GENERAL_SUBTREE_free(subtree);
        return 0;
    }
    return 1;
}

static GENERAL_NAME *string_name(int type, const unsigned char *bytes, size_t length) {
    ASN1_STRING *value = ASN1_STRING_type_new(type == GEN_DNS ? V_ASN1_IA5STRING : V_ASN1_OCTET_STRING);
    GENERAL_NAME *name = GENERAL_NAME_new();
    if (value == NULL || name == NULL || ASN1_STRING_set(value, bytes, (int)length) != 1) {
        ASN1_STRING_free(value);
        GENERAL_NAME_free(name);
        return NULL;
    }
    GENERAL_NAME_set0_value(name, type, value);
    return name;
}

int ctlsshim_name_constraints_add_dns(NAME_CONSTRAINTS *constraints, int excluded, const char *name) {
    GENERAL_NAME *general = string_name(GEN_DNS, (const unsigned char *)name, strlen(name));
    return general != NULL && add_subtree(constraints, excluded, general);
}

int ctlsshim_name_constraints_add_ip(NAME_CONSTRAINTS *constraints, int excluded,
                                     const unsigned char *address_and_mask, size_t length) {
    if (length != 8 && length != 32) return 0;
    GENERAL_NAME *general = string_name(GEN_IPADD, address_and_mask, length);
    return general != NULL && add_subtree(constraints, excluded, general);
}

int ctlsshim_name_constraints_count(const NAME_CONSTRAINTS *constraints, int excluded) {
    STACK_OF(GENERAL_SUBTREE) *list = excluded ? constraints->excludedSubtrees : constraints->permittedSubtrees;
    return list == NULL ? 0 : sk_GENERAL_SUBTREE_num(list);
}

int ctlsshim_name_constraints_entry(const NAME_CONSTRAINTS *constraints, int excluded, int index,
                                    const unsigned char **data, int *length) {
    STACK_OF(GENERAL_SUBTREE) *list = excluded ? constraints->excludedSubtrees : constraints->permittedSubtrees;
    GENERAL_SUBTREE *subtree = sk_GENERAL_SUBTREE_value(list, index);
    if (subtree == NULL || subtree->base == NULL) return 0;
    int type = 0;
    ASN1_STRING *value = GENERAL_NAME_get0_value(subtree->base, &type);
    if (type != GEN_DNS && type != GEN_IPADD) return 0;
    *data = ASN1_STRING_get0_data(value);
    *length = ASN1_STRING_length(value);
    return type == GEN_DNS ? 1 : 2;
}

NAME_CONSTRAINTS *ctlsshim_certificate_name_constraints(X509 *certificate, int *present, int *critical) {
    int position = X509_get_ext_by_NID(certificate, NID_name_constraints, -1);
    *present = position >= 0;
    *critical = 0;
    if (position < 0) return NULL;
    *critical = X509_EXTENSION_get_critical(X509_get_ext(certificate, position));
    return X509_get_ext_d2i(certificate, NID_name_constraints, NULL, NULL);
}

// A random positive serial of 16 bytes (CA/Browser Forum: at least 64 bits of randomness).
static int set_random_serial(X509 *certificate) {
    unsigned char bytes[16];
    if (RAND_bytes(bytes, sizeof bytes) != 1) return 0;
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01;  // never a leading zero byte, so the DER encoding keeps all 16
    BIGNUM *number = BN_bin2bn(bytes, sizeof bytes, NULL);
    int ok = number != NULL && BN_to_ASN1_INTEGER(number, X509_get_serialNumber(certificate)) != NULL;
    BN_free(number);
    return ok;
}

static int add_config_extension(X509 *certificate, X509 *issuer, int nid, const char *value) {
    X509V3_CTX context;
    X509V3_set_ctx(&context, issuer, certificate, NULL, NULL, 0);
    X509_EXTENSION *extension = X509V3_EXT_conf_nid(NULL, &context, nid, value);
    int ok = extension != NULL && X509_add_ext(certificate, extension, -1) == 1;
    X509_EXTENSION_free(extension);
    return ok;
}

// Version, serial, validity, subject and key: what the CA and its leaves have in common.
static X509 *new_certificate(EVP_PKEY *key, X509_NAME *subject, long not_before, long not_after) {
    X509 *certificate = X509_new();
    if (certificate == NULL) return NULL;
    if (X509_set_version(certificate, 2) != 1 || set_random_serial(certificate) != 1 ||
        X509_gmtime_adj(X509_getm_notBefore(certificate), not_before) == NULL ||
        X509_gmtime_adj(X509_getm_notAfter(certificate), not_after) == NULL ||
        X509_set_subject_name(certificate, subject) != 1 || X509_set_pubkey(certificate, key) != 1) {
        X509_free(certificate);
        return NULL;
    }
    return certificate;
}

static X509_NAME *subject_name(const char *common_name) {
    X509_NAME *name = X509_NAME_new();
    if (name == NULL) return NULL;
    if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)"Outbox", -1, -1, 0) != 1 ||
        (common_name != NULL &&
         X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)common_name, -1, -1, 0) != 1)) {
        X509_NAME_free(name);
        return NULL;
    }
    return name;
}

X509 *ctlsshim_ca_certificate(EVP_PKEY *key, const char *common_name, long not_before, long not_after,
                              NAME_CONSTRAINTS *constraints) {
    X509_NAME *subject = subject_name(common_name);
    if (subject == NULL) return NULL;
    X509 *certificate = new_certificate(key, subject, not_before, not_after);
    int ok = certificate != NULL && X509_set_issuer_name(certificate, subject) == 1 &&
             add_config_extension(certificate, certificate, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
             add_config_extension(certificate, certificate, NID_key_usage, "critical,keyCertSign,cRLSign") &&
             add_config_extension(certificate, certificate, NID_ext_key_usage, "serverAuth") &&
             add_config_extension(certificate, certificate, NID_subject_key_identifier, "hash") &&
             (constraints == NULL ||
              X509_add1_ext_i2d(certificate, NID_name_constraints, constraints, 1, X509V3_ADD_DEFAULT) == 1) &&
             X509_sign(certificate, key, EVP_sha256()) > 0;
    X509_NAME_free(subject);
    if (!ok) {
        X509_free(certificate);
        return NULL;
    }
    return certificate;
}

X509 *ctlsshim_leaf_certificate(X509 *issuer, EVP_PKEY *issuer_key, EVP_PKEY *key, const char *dns_name,
                                const unsigned char *ip, size_t ip_length, long not_before, long not_after) {
    if (dns_name == NULL && ip_length != 4 && ip_length != 16) return NULL;
    X509_NAME *subject = subject_name(dns_name);
    GENERAL_NAMES *names = sk_GENERAL_NAME_new_null();
    GENERAL_NAME *name = dns_name != NULL ? string_name(GEN_DNS, (const unsigned char *)dns_name, strlen(dns_name))
                                          : string_name(GEN_IPADD, ip, ip_length);
    X509 *certificate = NULL;
    int ok = subject != NULL && names != NULL && name != NULL && sk_GENERAL_NAME_push(names, name) > 0;
    if (!ok) GENERAL_NAME_free(name);  // not owned by the stack unless the push succeeded
    ok = ok && (certificate = new_certificate(key, subject, not_before, not_after)) != NULL &&
         X509_set_issuer_name(certificate, X509_get_subject_name(issuer)) == 1 &&
         X509_add1_ext_i2d(certificate, NID_subject_alt_name, names, 0, X509V3_ADD_DEFAULT) == 1 &&
         add_config_extension(certificate, issuer, NID_basic_constraints, "CA:FALSE") &&
         add_config_extension(certificate, issuer, NID_key_usage, "critical,digitalSignature") &&
         add_config_extension(certificate, issuer, NID_ext_key_usage, "serverAuth") &&
         add_config_extension(certificate, issuer, NID_subject_key_identifier, "hash") &&
         add_config_extension(certificate, issuer, NID_authority_key_identifier, "keyid") &&
         X509_sign(certificate, issuer_key, EVP_sha256()) > 0;
    X509_NAME_free(subject);
    GENERAL_NAMES_free(names);
    if (!ok) {
        X509_free(certificate);
        return NULL;
    }
    return certificate;
}

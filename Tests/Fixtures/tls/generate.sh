#!/bin/sh
# Makes the TLS fixtures that are missing. The outputs are committed, so every machine uses the
# same CAs; a file that exists is never touched, so adding a fixture leaves the others (and the
# CA) as they are. To renew one, delete it (and its key) and rerun. Needs OpenSSL 1.1.1+ (3.0 on
# Debian 12) and GNU date.
#
#   ca.pem / ca-key.pem                 test CA; nameConstraints: only 127.0.0.1 and localhost
#   server.pem / server-key.pem         leaf for IP:127.0.0.1, DNS:localhost, signed by the CA
#   untrusted.pem / untrusted-key.pem   self-signed leaf for the same names, trusted by nobody
#   expired.pem / expired-key.pem       leaf for the same names, signed by the CA, expired a day
#                                       before it was made
#   wrong-host.pem / wrong-host-key.pem leaf for DNS:localhost only, signed by the CA: a client
#                                       that connects to 127.0.0.1 must refuse it
#   client-ca.pem / client-ca-key.pem   CA for client certificates (mTLS), clientAuth only
#   client.pem / client-key.pem         client certificate signed by the client CA
#   cn-only.pem / cn-only-key.pem       leaf signed by the CA naming localhost only in its subject
#                                       CN, without subjectAltName: a client must refuse it
#                                       (RFC 9525 §6.3: no fallback to the CN)
#   rsa-server.pem / rsa-server-key.pem the server leaf with an RSA 2048 key, for origins that
#                                       offer only RSA key exchange or RSA-signed suites
set -eu
cd "$(dirname "$0")"

# A new CA would not have signed the leaves already here: refuse rather than leave them
# orphaned (delete them too to renew the CA).
refuse_orphans() { # CA_FILE SIGNED_FILE...
    ca=$1
    shift
    [ -f "$ca" ] && return 0
    for signed in "$@"; do
        if [ -f "$signed" ]; then
            echo "generate.sh: $ca is missing but $signed (signed by it) exists: delete both to renew" >&2
            exit 1
        fi
    done
}
refuse_orphans ca.pem server.pem expired.pem wrong-host.pem cn-only.pem rsa-server.pem
refuse_orphans client-ca.pem client.pem

# Valid from yesterday, so a CI machine whose clock lags a little still accepts them, for 20
# years. `openssl ca` is used because `req -x509` / `x509 -req` cannot set the start date (nor
# an end date in the past, which the expired leaf needs).
start=$(date -u -d '1 day ago' +%Y%m%d%H%M%SZ)
end=$(date -u -d '1 day ago + 20 years' +%Y%m%d%H%M%SZ)
expired_start=$(date -u -d '2 days ago' +%Y%m%d%H%M%SZ)
expired_end=$start

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/index.txt"

cat >"$tmp/openssl.cnf" <<CNF
[ca]
default_ca = test_ca
[test_ca]
database = $tmp/index.txt
new_certs_dir = $tmp
serial = $tmp/serial
rand_serial = yes
default_md = sha256
policy = any_subject
unique_subject = no
copy_extensions = none
[any_subject]
organizationName = optional
commonName = supplied
[req]
distinguished_name = dn
prompt = no
[dn]
[ca_ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
# Chains through this CA are good for TLS server authentication only (no code or mail
# signing, no client certificates) in verifiers that honour EKU on CAs, OpenSSL among them.
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
# critical: a verifier that does not understand nameConstraints must reject every chain
# through this CA instead of ignoring the restriction (RFC 5280 §4.2.1.10). A DNS subtree
# also permits every subdomain, and "x.localhost" may be sent to a real DNS server by some
# resolvers, so ".localhost" (subdomains only, not "localhost" itself) is excluded.
nameConstraints = critical, permitted;IP:127.0.0.1/255.255.255.255, permitted;DNS:localhost, excluded;DNS:.localhost
[leaf_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
# Inside the CA's nameConstraints (so the chain itself is fine), but without the address the
# tests connect to: verification fails on the name check alone ("IP address mismatch").
[wrong_host_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
# No subjectAltName at all: the name is only in the subject's CN (localhost, inside the CA's
# nameConstraints, which OpenSSL applies to a CN when there is no SAN). RFC 9525 §6.3: a
# client must not fall back to the CN, so this leaf is good for no host.
[cn_only_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
# The server leaf for an RSA key: keyEncipherment too, which static-RSA key exchange needs (an
# origin offering only such suites must be reachable up to the cipher choice).
[rsa_leaf_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
# The client CA is a separate one: the server CA's EKU (serverAuth only) would make any
# client certificate it signed unusable, and keeping the two apart keeps that CA as narrow as
# it is. Only test origins (the TLS front's --client-ca) ever trust this one.
[client_ca_ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
[client_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
CNF

# EC P-256 keys, unless key_type=rsa (RSA 2048) for the one make call that sets it.
key() {
    if [ "${key_type:-ec}" = rsa ]; then openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1"
    else openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; fi
}
csr() { openssl req -new -config "$tmp/openssl.cnf" -key "$1" -subj "$2" -out "$3"; }
sign() { # sign CSR OUT EXTENSIONS START END [ca options...]
    in=$1 out=$2 ext=$3 from=$4 until=$5
    shift 5
    openssl ca -batch -notext -config "$tmp/openssl.cnf" -startdate "$from" -enddate "$until" \
        -extensions "$ext" -in "$in" -out "$out" "$@"
}
# make NAME SUBJECT EXTENSIONS START END [ca options...]: NAME.pem and NAME-key.pem, unless
# NAME.pem exists already.
make() {
    name=$1 subject=$2 ext=$3 from=$4 until=$5
    shift 5
    [ -f "$name.pem" ] && return 0
    key "$name-key.pem"
    csr "$name-key.pem" "$subject" "$tmp/$name.csr"
    sign "$tmp/$name.csr" "$name.pem" "$ext" "$from" "$until" "$@"
    echo "generate.sh: made $name.pem"
}
make ca "/O=Outbox tests/CN=Outbox test loopback CA (127.0.0.1, localhost)" ca_ext "$start" "$end" \
    -selfsign -keyfile ca-key.pem
make server "/CN=localhost" leaf_ext "$start" "$end" -cert ca.pem -keyfile ca-key.pem
make untrusted "/O=Outbox tests (untrusted)/CN=localhost" leaf_ext "$start" "$end" \
    -selfsign -keyfile untrusted-key.pem
make expired "/O=Outbox tests (expired)/CN=localhost" leaf_ext "$expired_start" "$expired_end" \
    -cert ca.pem -keyfile ca-key.pem
make wrong-host "/O=Outbox tests (wrong host)/CN=localhost" wrong_host_ext "$start" "$end" \
    -cert ca.pem -keyfile ca-key.pem
make client-ca "/O=Outbox tests/CN=Outbox test client CA" client_ca_ext "$start" "$end" \
    -selfsign -keyfile client-ca-key.pem
make client "/O=Outbox tests/CN=Outbox test client" client_ext "$start" "$end" \
    -cert client-ca.pem -keyfile client-ca-key.pem
make cn-only "/O=Outbox tests (CN only)/CN=localhost" cn_only_ext "$start" "$end" \
    -cert ca.pem -keyfile ca-key.pem
key_type=rsa make rsa-server "/O=Outbox tests (RSA)/CN=localhost" rsa_leaf_ext "$start" "$end" \
    -cert ca.pem -keyfile ca-key.pem

chmod 0644 ./*.pem

# What each fixture is for, checked: the verdicts the tests rely on, with OpenSSL's reasons.
openssl verify -purpose sslserver -CAfile ca.pem server.pem
openssl verify -purpose sslclient -CAfile client-ca.pem client.pem
openssl verify -purpose sslserver -CAfile ca.pem wrong-host.pem
openssl verify -purpose sslserver -verify_ip 127.0.0.1 -CAfile ca.pem rsa-server.pem
refused() { # REASON openssl-verify-arguments...: verify must fail, saying REASON
    reason=$1
    shift
    if out=$(openssl verify "$@" 2>&1); then
        echo "generate.sh: openssl verify $* passed; it must fail with \"$reason\"" >&2
        exit 1
    fi
    case $out in
    *"$reason"*) echo "refused as expected ($reason): $*" ;;
    *) echo "generate.sh: openssl verify $* failed without \"$reason\":" >&2; echo "$out" >&2; exit 1 ;;
    esac
}
refused "certificate has expired" -purpose sslserver -CAfile ca.pem expired.pem
refused "IP address mismatch" -purpose sslserver -verify_ip 127.0.0.1 -CAfile ca.pem wrong-host.pem
refused "self-signed certificate" -purpose sslserver -CAfile ca.pem untrusted.pem
# The chain is good, and OpenSSL's default host check falls back to the CN, so this passes:
# that fallback is what the proxy turns off (X509_CHECK_FLAG_NEVER_CHECK_SUBJECT), and its
# tests check that it refuses the leaf.
openssl verify -purpose sslserver -verify_hostname localhost -CAfile ca.pem cn-only.pem

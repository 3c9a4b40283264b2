#!/bin/sh
# Regenerates the loopback-only test CA and the certificates it signs. Run once; the outputs
# are committed so every machine trusts the same CA. Needs OpenSSL 1.1.1+ and GNU date.
#
#   ca.pem / ca-key.pem               test CA; nameConstraints: only 127.0.0.1 and localhost
#   server.pem / server-key.pem       leaf for IP:127.0.0.1, DNS:localhost, signed by the CA
#   untrusted.pem / untrusted-key.pem self-signed leaf for the same names, trusted by nobody
set -eu
cd "$(dirname "$0")"

# Valid from yesterday, so a CI machine whose clock lags a little still accepts them, for 20
# years. `openssl ca` is used because `req -x509` / `x509 -req` cannot set the start date.
start=$(date -u -d '1 day ago' +%Y%m%d%H%M%SZ)
end=$(date -u -d '1 day ago + 20 years' +%Y%m%d%H%M%SZ)

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
# also permits every subdomain, and `x.localhost` may be sent to a real DNS server by some
# resolvers, so `.localhost` (subdomains only, not `localhost` itself) is excluded.
nameConstraints = critical, permitted;IP:127.0.0.1/255.255.255.255, permitted;DNS:localhost, excluded;DNS:.localhost
[leaf_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
CNF

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
csr() { openssl req -new -config "$tmp/openssl.cnf" -key "$1" -subj "$2" -out "$3"; }
sign() { # sign CSR OUT EXTENSIONS [ca options...]
    in=$1 out=$2 ext=$3
    shift 3
    openssl ca -batch -notext -config "$tmp/openssl.cnf" -startdate "$start" -enddate "$end" \
        -extensions "$ext" -in "$in" -out "$out" "$@"
}

key ca-key.pem
csr ca-key.pem "/O=Outbox tests/CN=Outbox test loopback CA (127.0.0.1, localhost)" "$tmp/ca.csr"
sign "$tmp/ca.csr" ca.pem ca_ext -selfsign -keyfile ca-key.pem

key server-key.pem
csr server-key.pem "/CN=localhost" "$tmp/server.csr"
sign "$tmp/server.csr" server.pem leaf_ext -cert ca.pem -keyfile ca-key.pem

key untrusted-key.pem
csr untrusted-key.pem "/O=Outbox tests (untrusted)/CN=localhost" "$tmp/untrusted.csr"
sign "$tmp/untrusted.csr" untrusted.pem leaf_ext -selfsign -keyfile untrusted-key.pem

chmod 0644 ./*.pem
openssl verify -purpose sslserver -CAfile ca.pem server.pem

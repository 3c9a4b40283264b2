#!/bin/sh
# Adds the Outbox loopback-only test CA (Tests/Fixtures/tls/ca.pem) to the system trust store,
# which is the only one FoundationNetworking's URLSession (libcurl) reads on Linux, so the
# https:// upstream tests can run. Idempotent: running it again changes nothing. The CA can
# only vouch for 127.0.0.1 and localhost (see Tests/Fixtures/tls/README.md).
#
# Needs root (or sudo) and Debian/Ubuntu's update-ca-certificates; installs the
# ca-certificates package with apt-get when that command is missing.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
source_ca="$here/../Fixtures/tls/ca.pem"
target_dir=/usr/local/share/ca-certificates
target="$target_dir/outbox-test-loopback-ca.crt"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "install-test-ca.sh: needs root (or sudo) to run: $*" >&2
        exit 1
    fi
}

if [ ! -f "$source_ca" ]; then
    echo "install-test-ca.sh: missing $source_ca" >&2
    exit 1
fi

if ! command -v update-ca-certificates >/dev/null 2>&1 && [ ! -x /usr/sbin/update-ca-certificates ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ca-certificates
fi
PATH="$PATH:/usr/sbin:/sbin"

if [ -f "$target" ] && cmp -s "$source_ca" "$target"; then
    # Already installed; make sure the bundle holds it too (a previous run may have been
    # interrupted between the copy and the update).
    if grep -qF "$(sed -n 2p "$source_ca")" /etc/ssl/certs/ca-certificates.crt 2>/dev/null; then
        echo "install-test-ca.sh: test CA already trusted ($target)"
        exit 0
    fi
fi

as_root mkdir -p "$target_dir"
as_root install -m 0644 "$source_ca" "$target"
as_root update-ca-certificates
echo "install-test-ca.sh: test CA trusted ($target)"

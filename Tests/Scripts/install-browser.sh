#!/bin/sh
# Installs what Tests/Scripts/dashboard_test.py needs: Debian's headless-capable Chromium,
# its matching chromedriver, and the Selenium Python bindings. Idempotent: anything already
# present is left alone, so CI can run it on every job. Everything it installs talks to
# 127.0.0.1 only during the tests (the dashboard test opens the local proxy's admin page).
#
# Needs root (or sudo) for apt-get; pip installs for the current user when not root.
set -eu

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "install-browser.sh: needs root (or sudo) to run: $*" >&2
        exit 1
    fi
}

# Debian ships the browser as `chromium` and the driver as `chromium-driver` (binary
# `chromedriver`); both come from the same source package, so their versions match.
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v chromedriver >/dev/null 2>&1 || missing="$missing chromium-driver"
if [ -n "$missing" ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # shellcheck disable=SC2086 # the list is meant to split into package names
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
else
    echo "install-browser.sh: chromium and chromedriver already installed"
fi

if python3 -c 'import selenium' >/dev/null 2>&1; then
    echo "install-browser.sh: selenium already installed"
else
    pip_flags=""
    [ "$(id -u)" -eq 0 ] || pip_flags="--user"
    # Debian marks its Python as externally managed (PEP 668); the test only needs the one
    # package, so installing beside the system packages is the simple choice here.
    # shellcheck disable=SC2086
    python3 -m pip install -q $pip_flags selenium 2>/dev/null \
        || python3 -m pip install -q $pip_flags --break-system-packages selenium
fi

chromium --version
chromedriver --version
python3 -c 'import selenium; print("selenium", selenium.__version__)'

#!/bin/sh
# Installs what Tests/Scripts/dashboard_test.py needs, all from Debian's packages: headless-capable
# Chromium, its matching chromedriver, and the Selenium Python bindings (python3-selenium, which
# is for Debian's /usr/bin/python3; the test finds that Python when the one on PATH lacks
# Selenium). Idempotent: anything already present is left alone, so CI can run it on every job.
# Everything it installs talks to 127.0.0.1 only during the tests (the dashboard test opens the
# local proxy's admin page).
#
# Needs root (or sudo) for apt-get.
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
/usr/bin/python3 -c 'import selenium' >/dev/null 2>&1 || missing="$missing python3-selenium"
if [ -n "$missing" ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # shellcheck disable=SC2086 # the list is meant to split into package names
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
else
    echo "install-browser.sh: chromium, chromedriver and python3-selenium already installed"
fi

chromium --version
chromedriver --version
/usr/bin/python3 -c 'import selenium; print("selenium", selenium.__version__)'

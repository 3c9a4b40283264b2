# shellcheck shell=bash disable=SC2034  # BINS and NAMES are read by the scripts that source this file
# What restart.sh and queue-at-rest.sh share: log lines, the tools and free ports they check,
# the binaries they measure, and stopping their outbox (OBX_PID) and removing their directory
# (RUN) on exit. Sourced, not run; the caller sets ROOT, RUN and OBX_PID first.

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Dies unless every tool named is on PATH.
need_tools() {
  local tool
  for tool in "$@"; do command -v "$tool" >/dev/null || die "needs $tool (apt-get install wrk curl)"; done
}

# Dies when something already listens on one of the ports (BASE_PORT moves them).
need_free_ports() {
  local port
  for port in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then die "port $port is in use (BASE_PORT moves it)"; fi
  done
}

# Sets OUTBOX_BIN (built in release from ROOT when unset), BINS and NAMES: the baseline
# (OUTBOX_BASELINE_BIN) first when there is one, so old and new alternate in that order.
select_binaries() {
  if [[ -n ${OUTBOX_BIN:-} ]]; then
    [[ -x $OUTBOX_BIN ]] || die "OUTBOX_BIN=$OUTBOX_BIN is not an executable file"
  else
    log "building outbox (release)"
    (cd "$ROOT" && swift build -c release --product outbox >/dev/null)
    OUTBOX_BIN=$(cd "$ROOT" && swift build -c release --show-bin-path)/outbox
  fi
  BINS=("$OUTBOX_BIN") NAMES=(outbox)
  if [[ -n ${OUTBOX_BASELINE_BIN:-} ]]; then
    [[ -x $OUTBOX_BASELINE_BIN ]] || die "OUTBOX_BASELINE_BIN=$OUTBOX_BASELINE_BIN is not an executable file"
    BINS=("$OUTBOX_BASELINE_BIN" "$OUTBOX_BIN") NAMES=(baseline outbox)
  fi
}

cleanup() {
  if [[ -n $OBX_PID ]]; then kill -9 "$OBX_PID" 2>/dev/null || true; wait "$OBX_PID" 2>/dev/null || true; fi
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck shell=bash disable=SC2034  # BINS and NAMES are read by the scripts that source this file
# What restart.sh, queue-at-rest.sh and admin-memory.sh share: log lines, the tools and free
# ports they check, the binaries they measure, starting an outbox against a down upstream and
# asking its pending count, and stopping their outbox (OBX_PID) and removing their directory
# (RUN) on exit. Sourced, not run; the caller sets ROOT, RUN and OBX_PID first (and OBX_PORT,
# DOWN_PORT, START_TIMEOUT for start_outbox).

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

# Starts outbox from binary $1 on 127.0.0.1:OBX_PORT with the upstream http://127.0.0.1:DOWN_PORT
# (never started by these scripts: the origin is down) and data dir $2, more flags after them,
# and waits for its listening line (START_TIMEOUT s); sets OBX_PID. Its stderr goes to RUN/outbox.err.
start_outbox() {
  local binary=$1 data=$2 t0=$SECONDS
  shift 2
  : >"$RUN/outbox.err"
  "$binary" --listen "127.0.0.1:$OBX_PORT" --upstream "http://127.0.0.1:$DOWN_PORT" --data-dir "$data" \
    --log-level warn "$@" >/dev/null 2>"$RUN/outbox.err" &
  OBX_PID=$!
  until grep -q "outbox listening on" "$RUN/outbox.err" 2>/dev/null; do
    kill -0 "$OBX_PID" 2>/dev/null || { cat "$RUN/outbox.err" >&2; die "outbox exited before listening"; }
    ((SECONDS - t0 < START_TIMEOUT)) || die "outbox not listening after ${START_TIMEOUT}s"
    sleep 0.01
  done
}
stop_outbox() { kill -TERM "$OBX_PID"; wait "$OBX_PID" 2>/dev/null || true; OBX_PID=; }
# The pending count of /admin/status.
pending() {
  curl -s "http://127.0.0.1:$OBX_PORT/admin/status" | python3 -c "import json,sys; print(json.load(sys.stdin)['counts']['pending'])"
}

cleanup() {
  if [[ -n $OBX_PID ]]; then kill -9 "$OBX_PID" 2>/dev/null || true; wait "$OBX_PID" 2>/dev/null || true; fi
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

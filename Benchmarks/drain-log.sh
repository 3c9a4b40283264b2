#!/usr/bin/env bash
# The drain as the log sees it: wrk POSTs 1 KiB bodies for FILL seconds with the upstream down,
# then a local nginx starts and the queue drains into it; prints the rate (from nginx's start
# to an empty queue, so the probe that notices nginx is counted; polled by status-poll.sh),
# Outbox's CPU per operation, and group commit's counters per drained operation (fdatasyncs,
# records, seconds).
#
#   OUTBOX_BIN=/path/to/outbox Benchmarks/drain-log.sh      # ~20 s
#   KEYS=0 FILL=5 RESTART=1 OUTBOX_BIN=… Benchmarks/drain-log.sh
#   PERF=1 OUTBOX_BIN=… Benchmarks/drain-log.sh               # perf record -g of the drain
#
# Knobs (env): KEYS=16 (ordering keys, 0: one lane)  FILL=3 (s of wrk)  RESTART=0 (1: kill -9
#   and restart before the drain, so it replays recovered operations)  PERF=0 (1: record into
#   PERF_OUT=drain.perf.data)  BASE_PORT=19300 (upstream; outbox +3)
# Loopback only; everything started here is stopped on exit; data lives in a temp dir.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=${OUTBOX_BIN:?set OUTBOX_BIN to an outbox binary (swift build -c release --product outbox)}
KEYS=${KEYS:-16}; export KEYS
FILL=${FILL:-3}
RESTART=${RESTART:-0}
PERF=${PERF:-0}
BASE_PORT=${BASE_PORT:-19300}
UP=$BASE_PORT OBX=$((BASE_PORT + 3))
RUN=$(mktemp -d /tmp/drainlog.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.3
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$RUN"
}
trap cleanup EXIT
for tool in wrk nginx curl python3; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }; done
BODY=$(printf 'x%.0s' $(seq 1 1014))
sed -e "s#@RUNDIR@#$RUN#g" -e "s#@UP_PORT@#$UP#g" -e "s#@BODY1K@#$BODY#" "$HERE/upstream.conf" >"$RUN/upstream.conf"
mkdir -p "$RUN/upstream-body"

start() {
  : >"$RUN/err"
  "$BIN" --listen "127.0.0.1:$OBX" --upstream "http://127.0.0.1:$UP" --data-dir "$RUN/data" --log-level warn 2>"$RUN/err" >/dev/null &
  OPID=$!
  PIDS+=("$OPID")
  for ((i = 0; i < 3000; i++)); do
    grep -q "listening on" "$RUN/err" && return
    kill -0 "$OPID" 2>/dev/null || { cat "$RUN/err" >&2; exit 1; }
    sleep 0.01
  done
  echo "outbox did not start" >&2; exit 1
}
commit() { curl -s "http://127.0.0.1:$OBX/admin/metrics" | grep '^outbox_storage_[a-z_]*_total ' || true; }
source "$HERE/status-poll.sh"

start
if ((KEYS > 0)); then SCRIPT=$HERE/post-1k-keyed.lua; else SCRIPT=$HERE/post-1k.lua; fi
wrk -t2 -c64 -d"${FILL}s" -s "$SCRIPT" "http://127.0.0.1:$OBX/echo" | grep Requests/sec
if ((RESTART)); then kill -9 "$OPID"; wait "$OPID" 2>/dev/null || true; start; fi
status_open "$OBX" "$OPID"
status_poll
N=$BUSY
commit >"$RUN/m0"
T0=$TICKS
if ((PERF)); then perf record -F 2000 -g -o "${PERF_OUT:-drain.perf.data}" -p "$OPID" 2>/dev/null & PP=$!; sleep 0.5; fi
S0=$EPOCHREALTIME
nginx -p "$RUN" -e "$RUN/up.err" -c "$RUN/upstream.conf" &
PIDS+=($!)
for ((i = 0; i < 60000; i++)); do
  status_poll
  ((BUSY == 0)) && break
  status_nap
done
S1=$AT T1=$TICKS
status_close
commit >"$RUN/m1"
if ((PERF)); then kill -INT "$PP"; wait "$PP" 2>/dev/null || true; fi
python3 - "$N" "$S0" "$S1" "$((T1 - T0))" "$(getconf CLK_TCK)" "$RUN/m0" "$RUN/m1" "$KEYS" <<'PY'
import sys
n, s0, s1, ticks, hz = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
read = lambda path: {l.split()[0]: float(l.split()[1]) for l in open(path) if l.strip()}
before, after = read(sys.argv[6]), read(sys.argv[7])
lanes = f"over {sys.argv[8]} ordering keys" if sys.argv[8] != "0" else "one lane"
print(f"drained {n} operations ({lanes}) in {s1 - s0:.2f} s: {n / (s1 - s0):.0f} ops/s, {ticks * 1e6 / hz / max(n, 1):.1f} µs CPU per operation")
per = lambda name: (after[name] - before.get(name, 0)) / max(n, 1)
if "outbox_storage_syncs_total" in after:
    syncs = per("outbox_storage_syncs_total")
    print(f"  group commit: {syncs:.3f} fdatasyncs per operation ({1 / syncs if syncs else 0:.1f} records each), "
          f"{per('outbox_storage_sync_seconds_total') * 1e6:.1f} µs of write+sync per operation")
PY

#!/usr/bin/env bash
# Drain at real-world latency: OPERATIONS POSTs queued while Outbox is switched offline, then
# delivered into an upstream that answers every request after DELAY_MS (slow-upstream.py), once
# spread over KEYS ordering keys (`Outbox-Ordering-Key`) and once without keys. Prints ops/s
# next to the ideal min(keys, maxConcurrentPerOrigin) / delay (1 / delay without keys), and
# what the upstream saw: most requests at once, requests of one key overlapping (the ordering
# promise broken), requests of one key out of order.
#
#   Benchmarks/drain.sh                                  # build outbox (release), ~1 min
#   OUTBOX_BIN=/path/to/outbox Benchmarks/drain.sh       # skip the build
#   OPERATIONS=500 KEYS=4 DELAY_MS=20 Benchmarks/drain.sh
#
# Knobs (env): OPERATIONS=2000  KEYS=16  DELAY_MS=5  MAX_CONCURRENT=8 (replay.maxConcurrentPerOrigin,
#   left out with a note when this build does not know the key)  BASE_PORT=19200 (upstream;
#   outbox +1)  OUTBOX_BIN  TIMEOUT=600 (s per drain)
# Loopback only; every process started here is stopped on exit; data lives in a temp dir.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OPERATIONS=${OPERATIONS:-2000}
KEYS=${KEYS:-16}
DELAY_MS=${DELAY_MS:-5}
MAX_CONCURRENT=${MAX_CONCURRENT:-8}
BASE_PORT=${BASE_PORT:-19200}
TIMEOUT=${TIMEOUT:-600}
UP_PORT=$BASE_PORT OBX_PORT=$((BASE_PORT + 1))
RUN=$(mktemp -d /tmp/drainbench.XXXXXX)
PIDS=()

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for knob in OPERATIONS DELAY_MS MAX_CONCURRENT BASE_PORT TIMEOUT; do
  [[ ${!knob} =~ ^[1-9][0-9]*$ ]] || die "$knob: expected a positive integer, got '${!knob}'"
done
[[ $KEYS =~ ^[0-9]+$ ]] || die "KEYS: expected an integer, got '$KEYS'"
command -v python3 >/dev/null || die "needs python3"

if [[ -n ${OUTBOX_BIN:-} ]]; then
  [[ -x $OUTBOX_BIN ]] || die "OUTBOX_BIN: $OUTBOX_BIN is not an executable"
else
  log "building outbox: swift build -c release --product outbox"
  (cd "$ROOT" && swift build -c release --product outbox >"$RUN/build.log" 2>&1) || { tail -20 "$RUN/build.log" >&2; die "build failed"; }
  OUTBOX_BIN=$(cd "$ROOT" && swift build -c release --show-bin-path)/outbox
fi

# replay.maxConcurrentPerOrigin only where this build knows it (an unknown key is refused).
CONFIG='{}'
CONCURRENCY_NOTE="replay.maxConcurrentPerOrigin $MAX_CONCURRENT"
echo "{\"replay\": {\"maxConcurrentPerOrigin\": $MAX_CONCURRENT}}" >"$RUN/probe.json"
if "$OUTBOX_BIN" check-config --config "$RUN/probe.json" >/dev/null 2>&1; then
  CONFIG=$(cat "$RUN/probe.json")
  EFFECTIVE=$MAX_CONCURRENT
else
  CONCURRENCY_NOTE="replay.maxConcurrentPerOrigin unknown to this build: one operation at a time per origin"
  EFFECTIVE=1
fi
echo "$CONFIG" >"$RUN/config.json"

wait_listening() {  # file what
  local i
  for ((i = 0; i < 300; i++)); do
    grep -q "listening" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  die "$2 did not start; its output:\n$(tail -20 "$1")"
}

run_once() {  # keys ; prints the client's JSON line
  local keys=$1 dir="$RUN/k$1"
  mkdir -p "$dir"
  python3 "$HERE/slow-upstream.py" --port "$UP_PORT" --delay-ms "$DELAY_MS" >"$dir/upstream.out" 2>&1 &
  local up=$!
  PIDS+=("$up")
  wait_listening "$dir/upstream.out" "slow-upstream.py"
  "$OUTBOX_BIN" --config "$RUN/config.json" --listen "127.0.0.1:$OBX_PORT" --upstream "http://127.0.0.1:$UP_PORT" \
    --data-dir "$dir/data" --log-level warn >"$dir/outbox.log" 2>&1 &
  local obx=$!
  PIDS+=("$obx")
  wait_listening "$dir/outbox.log" "outbox"
  python3 "$HERE/drain-client.py" --outbox "127.0.0.1:$OBX_PORT" --upstream "127.0.0.1:$UP_PORT" \
    --operations "$OPERATIONS" --keys "$keys" --timeout "$TIMEOUT" || die "the drain with $keys keys failed (logs in $dir)"
  kill -TERM "$obx" "$up" 2>/dev/null || true
  wait "$obx" "$up" 2>/dev/null || true
}

log "outbox: $OUTBOX_BIN; $OPERATIONS operations, upstream answers after $DELAY_MS ms; $CONCURRENCY_NOTE"
results=()
for keys in "$KEYS" 0; do
  log "drain with $( ((keys > 0)) && echo "$keys keys" || echo "no keys")"
  results+=("$(run_once "$keys")")
done

python3 - "$DELAY_MS" "$EFFECTIVE" "${results[@]}" <<'EOF'
import json, sys
delay = float(sys.argv[1]) / 1000
concurrency = int(sys.argv[2])
broken = []
print("keys  operations  seconds    ops/s   ideal ops/s  of ideal  upstream max at once  key overlaps  unkeyed overlaps  out of order")
for line in sys.argv[3:]:
    r = json.loads(line)
    lanes = min(r["keys"], concurrency) if r["keys"] > 0 else 1
    ideal = lanes / delay
    u = r["upstream"]
    print("%4d  %10d  %7.2f  %7.1f  %12.1f  %8.2f  %20d  %12d  %16d  %12d" % (
        r["keys"], r["operations"], r["seconds"], r["opsPerSecond"], ideal, r["opsPerSecond"] / ideal,
        u["maxConcurrent"], u["keyOverlaps"], u["unkeyedOverlaps"], u["outOfOrder"]))
    broken.extend("%d keys: %d %s" % (r["keys"], u[k], k) for k in ("keyOverlaps", "outOfOrder") if u[k])
    if r["keys"] == 0 and u["unkeyedOverlaps"]:
        broken.append("no keys: %d unkeyedOverlaps" % u["unkeyedOverlaps"])
if broken:
    sys.exit("ERROR: the upstream saw the ordering promise broken: " + ", ".join(broken))
EOF

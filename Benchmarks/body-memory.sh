#!/usr/bin/env bash
# Request-body memory: COUNT (40) concurrent POSTs of SIZE (8 MiB) bytes into Outbox, forwarded
# to an origin that reads each body slowly (RATE bytes/s per connection, 2 MiB/s) and then
# answers 503, so Outbox keeps every body for the whole upload and then stores it. Prints
# Outbox's peak resident set (VmHWM in /proc/PID/status) once every upload was answered, then
# lets the queue replay into the same origin (which now answers 201 and records what it got)
# and checks that each stored body's SHA-256 is the one sent; prints the peak again after the
# replay. The issue's acceptance: at most 200 MB peak for 40 × 8 MiB (850 MB before
# limits.bodyMemoryBytes).
#
#   Benchmarks/body-memory.sh                          # build outbox (release), one run
#   OUTBOX_BIN=/path/to/outbox Benchmarks/body-memory.sh
#   OUTBOX_BASELINE_BIN=/path/to/old/outbox Benchmarks/body-memory.sh   # old, then new
#   COUNT=40 SIZE=8388608 RATE=2097152 BODY_MEMORY=67108864 Benchmarks/body-memory.sh
#
# Needs python3 and curl. Everything listens on 127.0.0.1 only; Outbox and the origin are
# started here and stopped by their pids on exit, Ctrl-C or error.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
COUNT=${COUNT:-40}
SIZE=${SIZE:-8388608}
RATE=${RATE:-2097152}
BODY_MEMORY=${BODY_MEMORY:-67108864}
REPLAY_TIMEOUT=${REPLAY_TIMEOUT:-300}
RUN=$(mktemp -d /tmp/body-memory.XXXXXX)
OBX_PID=""
UP_PID=""
# shellcheck source=outbox-bins.sh
source "$HERE/outbox-bins.sh"

stop_all() {
  if [[ -n $UP_PID ]]; then kill "$UP_PID" 2>/dev/null || true; wait "$UP_PID" 2>/dev/null || true; UP_PID=""; fi
  cleanup
}
trap stop_all EXIT

need_tools python3 curl
select_binaries

# Waits for FILE to exist (a port file, a listening line), at most SECONDS.
wait_for_file() {
  local file=$1 seconds=$2 waited=0
  until [[ -s $file ]]; do
    ((waited < seconds * 10)) || die "$file did not appear within ${seconds}s"
    sleep 0.1; waited=$((waited + 1))
  done
}

vm() { awk -v key="$1:" '$1 == key { print $2 }' "/proc/$OBX_PID/status"; }

run_one() {
  local name=$1 binary=$2 dir="$RUN/$1"
  mkdir -p "$dir"
  python3 "$HERE/body-memory.py" upstream "$dir/upstream.port" "$RATE" 2>"$dir/upstream.err" &
  UP_PID=$!
  wait_for_file "$dir/upstream.port" 10
  local up_port
  up_port=$(cat "$dir/upstream.port")
  cat >"$dir/config.json" <<EOF
{"limits": {"bodyMemoryBytes": $BODY_MEMORY}, "queue": {"maxBodyBytes": $((SIZE * 2))},
 "reachability": {"probeIntervalSeconds": 0.2, "responseTimeoutSeconds": 600},
 "retry": {"preset": "immediate", "maxRetries": 50}}
EOF
  # An old binary that does not know bodyMemoryBytes refuses the key: it then runs without it.
  if ! "$binary" check-config --config "$dir/config.json" >/dev/null 2>&1; then
    python3 - "$dir/config.json" <<'EOF'
import json, sys
config = json.load(open(sys.argv[1]))
config["limits"].pop("bodyMemoryBytes", None)
json.dump(config, open(sys.argv[1], "w"))
EOF
  fi
  "$binary" serve --config "$dir/config.json" --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$up_port" \
    --data-dir "$dir/data" --log-level warn 2>"$dir/outbox.err" &
  OBX_PID=$!
  local waited=0 port=""
  until port=$(grep -o 'outbox listening on http://127.0.0.1:[0-9]*' "$dir/outbox.err" | grep -o '[0-9]*$'); do
    ((waited < 300)) || die "$name did not listen within 30 s: $(tail -5 "$dir/outbox.err")"
    kill -0 "$OBX_PID" 2>/dev/null || die "$name exited: $(tail -5 "$dir/outbox.err")"
    sleep 0.1; waited=$((waited + 1))
  done
  local base_hwm
  base_hwm=$(vm VmHWM)
  log "$name: $COUNT × $SIZE bytes, origin reading $RATE B/s per connection, bodyMemoryBytes $BODY_MEMORY"
  local started=$SECONDS
  python3 "$HERE/body-memory.py" client "$port" "$COUNT" "$SIZE" >"$dir/sent.json"
  local upload_s=$((SECONDS - started)) upload_hwm
  upload_hwm=$(vm VmHWM)
  local statuses
  statuses=$(python3 -c 'import json,sys,collections; print(dict(collections.Counter(str(v["status"]) for v in json.load(open(sys.argv[1])).values())))' "$dir/sent.json")
  # The replay delivers the stored bodies one by one (one lane); wait until all arrived.
  local deadline=$((SECONDS + REPLAY_TIMEOUT)) replayed=0
  while ((SECONDS < deadline)); do
    curl -s --max-time 10 "http://127.0.0.1:$up_port/__stats" >"$dir/received.json" || true
    replayed=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$dir/received.json" 2>/dev/null || echo 0)
    ((replayed >= COUNT)) && break
    sleep 0.5
  done
  local after_hwm
  after_hwm=$(vm VmHWM)
  local check
  check=$(python3 - "$dir/sent.json" "$dir/received.json" <<'EOF'
import json, sys
sent = json.load(open(sys.argv[1]))
try:
    received = json.load(open(sys.argv[2]))
except (OSError, ValueError):
    received = {}
same = sum(1 for key, value in sent.items() if received.get(key) == value["sha256"])
print("%d of %d stored bodies replayed with the SHA-256 sent" % (same, len(sent)))
EOF
)
  printf '%-9s upload %3d s  statuses %s\n' "$name" "$upload_s" "$statuses"
  printf '%-9s VmHWM at start %6d KiB, after the uploads %7d KiB (%.0f MB), after the replay %7d KiB (%.0f MB)\n' \
    "$name" "$base_hwm" "$upload_hwm" "$(echo "$upload_hwm * 1024 / 1000000" | bc -l)" \
    "$after_hwm" "$(echo "$after_hwm * 1024 / 1000000" | bc -l)"
  printf '%-9s %s\n' "$name" "$check"
  kill "$OBX_PID" 2>/dev/null || true; wait "$OBX_PID" 2>/dev/null || true; OBX_PID=""
  kill "$UP_PID" 2>/dev/null || true; wait "$UP_PID" 2>/dev/null || true; UP_PID=""
}

for index in "${!BINS[@]}"; do
  run_one "${NAMES[$index]}" "${BINS[$index]}"
done

#!/usr/bin/env bash
# The durable queue on loopback, in one run:
#   (a) durable 202s per second: wrk POSTing 1 KiB bodies with the upstream down, 64
#       connections, next to this disk's limits for one file per operation (the queue's first
#       design), one fdatasync per record, and batches of 64 (fsync-limit.c);
#   (b) drain rate: the operations queued in (a) replayed into a local nginx once it starts,
#       next to its ceiling: wrk into the same nginx over as many connections as lanes;
#   (c) restart with OPS_1M queued 1 KiB operations: time until listening, peak RSS.
#
#   Benchmarks/queue.sh                 # ~3-4 min with OPS_1M=1000000
#   OPS_1M=0 Benchmarks/queue.sh        # skip (c)
#   DURATION=5 OPS_1M=200000 Benchmarks/queue.sh
#   OUTBOX_BIN=/path/to/outbox Benchmarks/queue.sh   # measure a given binary, no build
#   KEYS=16 OPS_1M=0 Benchmarks/queue.sh   # (a) and (b) with writes over 16 ordering keys
#                                          # (lanes), replayed up to maxConcurrentPerOrigin at once
#   SKIP_DRAIN=1 OPS_1M=0 Benchmarks/queue.sh   # (a) only
#
# (a) also runs the same wrk load against nginx answering every POST with a 202 like Outbox's
# and storing nothing (accept-202.conf, NGINX_202_WORKERS workers, default one per CPU): the
# rate any HTTP server reaches on this machine with this client, the ceiling for Outbox's.
#
# Loopback only; every process started here is stopped on exit; data lives in a temp dir.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
OPS_1M=${OPS_1M:-1000000}
KEYS=${KEYS:-0}
if ((KEYS > 0)); then POST_SCRIPT="$HERE/post-1k-keyed.lua"; else POST_SCRIPT="$HERE/post-1k.lua"; fi
export KEYS
BASE_PORT=${BASE_PORT:-19100}
UP_PORT=$BASE_PORT OBX_PORT=$((BASE_PORT + 3)) ACCEPT_PORT=$((BASE_PORT + 4))
SKIP_DRAIN=${SKIP_DRAIN:-0}
CEILING_DURATION=${CEILING_DURATION:-3}
NGINX_202_WORKERS=${NGINX_202_WORKERS:-$(nproc)}
RUN=$(mktemp -d /tmp/queuebench.XXXXXX)
PIDS=()

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
cleanup() {
  local p
  # TERM first: nginx's master stops its workers on TERM, a KILL would orphan them.
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for tool in wrk nginx curl python3 gcc; do command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install wrk nginx curl)" >&2; exit 1; }; done
for port in $UP_PORT $OBX_PORT $ACCEPT_PORT; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "port $port is in use" >&2; exit 1; fi
done

if [[ -n ${OUTBOX_BIN:-} ]]; then
  BIN=$OUTBOX_BIN
  [[ -x $BIN ]] || { echo "OUTBOX_BIN=$BIN is not an executable file" >&2; exit 1; }
else
  log "building outbox (release)"
  (cd "$ROOT" && swift build -c release --product outbox >/dev/null)
  BIN=$(cd "$ROOT" && swift build -c release --show-bin-path)/outbox
fi

BODY=$(printf 'x%.0s' $(seq 1 1014))
sed -e "s#@RUNDIR@#$RUN#g" -e "s#@UP_PORT@#$UP_PORT#g" -e "s#@BODY1K@#$BODY#" "$HERE/upstream.conf" >"$RUN/upstream.conf"
mkdir -p "$RUN/upstream-body"
sed -e "s#@RUNDIR@#$RUN#g" -e "s#@PORT@#$ACCEPT_PORT#g" -e "s#@WORKERS@#$NGINX_202_WORKERS#g" "$HERE/accept-202.conf" >"$RUN/accept-202.conf"
mkdir -p "$RUN/accept-202-body"

start_outbox() {  # data dir; sets OBX_PID and STARTED (seconds until the listening line)
  local t0 i
  # Emptied here, not by the child's redirection: a look before the child opens the file would
  # find the previous run's listening line.
  : >"$RUN/outbox.err"
  t0=$(date +%s.%N)
  "$BIN" --listen "127.0.0.1:$OBX_PORT" --upstream "http://127.0.0.1:$UP_PORT" --data-dir "$1" \
    --log-level warn >"$RUN/outbox.out" 2>"$RUN/outbox.err" &
  OBX_PID=$!
  PIDS+=("$OBX_PID")
  for ((i = 0; i < 6000; i++)); do
    grep -q "outbox listening on" "$RUN/outbox.err" 2>/dev/null && break
    kill -0 "$OBX_PID" 2>/dev/null || { cat "$RUN/outbox.err" >&2; exit 1; }
    sleep 0.01
  done
  STARTED=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.2f}')")
}

count() {  # status field of /admin/status counts
  curl -s "http://127.0.0.1:$OBX_PORT/admin/status" | python3 -c "import json,sys; c=json.load(sys.stdin)['counts']; print($1)"
}

cpu_ticks() {  # utime + stime of the given processes, in clock ticks
  local p total=0
  for p in "$@"; do total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo "$total"
}
micros_per() {  # ticks requests -> CPU µs per request
  python3 -c "print(f'{$1 / $(getconf CLK_TCK) / max($2, 1) * 1e6:.1f}')"
}

rss_mb() { awk -v k="$2" '$1 == k":" {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }

SKIP_AB=${SKIP_AB:-0}
if ((SKIP_AB == 0)); then
# ---- (a) durable enqueues
log "(a) durable 202s: wrk -t2 -c$CONNS -d${DURATION}s, POST 1 KiB, upstream down"
start_outbox "$RUN/data-a"
# Group commit's counters (a binary from before they existed has none: the line is left out).
commit_counters() { curl -s "http://127.0.0.1:$OBX_PORT/admin/metrics" | grep -E '^outbox_storage_([a-z_]*_total |sync_duration_seconds_bucket)' || true; }
commit_counters >"$RUN/commit-0.txt"
CPU0=$(cpu_ticks "$OBX_PID")
T0_A=$EPOCHREALTIME
wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency -s "$POST_SCRIPT" "http://127.0.0.1:$OBX_PORT/echo" >"$RUN/wrk-a.txt"
T1_A=$EPOCHREALTIME
commit_counters >"$RUN/commit-1.txt"
OBX_CPU=$(micros_per $(($(cpu_ticks "$OBX_PID") - CPU0)) "$(awk '/requests in/ {print $1}' "$RUN/wrk-a.txt")")
QUEUED=$(count "c['pending']")
RPS=$(awk '/Requests\/sec/ {print $2}' "$RUN/wrk-a.txt")
P50=$(awk '$1 == "50%" {print $2}' "$RUN/wrk-a.txt")
P99=$(awk '$1 == "99%" {print $2}' "$RUN/wrk-a.txt")
NON2XX=$(awk '/Non-2xx/ {print $5}' "$RUN/wrk-a.txt")
gcc -O2 -o "$RUN/fsync-limit" "$HERE/fsync-limit.c"
mkdir -p "$RUN/fsync"
"$RUN/fsync-limit" "$RUN/fsync" 5 rename append group64 >"$RUN/fsync.txt" 2>&1 || true
# The ceiling: the same load, answered 202 by nginx with nothing stored.
log "(a) nginx 202 (no storage): wrk -t2 -c$CONNS -d${DURATION}s, $NGINX_202_WORKERS workers"
nginx -p "$RUN" -e "$RUN/accept-202.err" -c "$RUN/accept-202.conf" &
ACCEPT_PID=$!
PIDS+=("$ACCEPT_PID")
for ((i = 0; i < 500; i++)); do
  curl -s -o /dev/null -X POST -d x "http://127.0.0.1:$ACCEPT_PORT/echo" && break
  kill -0 "$ACCEPT_PID" 2>/dev/null || { cat "$RUN/accept-202.err" >&2; exit 1; }
  sleep 0.01
done
read -r -a ACCEPT_WORKERS <<<"$(pgrep -P "$ACCEPT_PID" | tr '\n' ' ')"
CPU0=$(cpu_ticks "${ACCEPT_WORKERS[@]}")
wrk -t2 -c"$CONNS" -d"${DURATION}s" -s "$POST_SCRIPT" "http://127.0.0.1:$ACCEPT_PORT/echo" >"$RUN/wrk-nginx202.txt"
NGINX202=$(awk '/Requests\/sec/ {print $2}' "$RUN/wrk-nginx202.txt")
NGINX_CPU=$(micros_per $(($(cpu_ticks "${ACCEPT_WORKERS[@]}") - CPU0)) "$(awk '/requests in/ {print $1}' "$RUN/wrk-nginx202.txt")")
kill -TERM "$ACCEPT_PID"; wait "$ACCEPT_PID" 2>/dev/null || true

# ---- (b) drain
# Timed from the first completion seen to the last, by one long-lived poll of /admin/status
# (status-poll.sh), so neither the probe that notices nginx nor the poll's own start is
# counted; Outbox's CPU over the same span, from /proc, gives the CPU per drained operation.
if ((SKIP_DRAIN == 0)); then
log "(b) drain: starting the upstream with $QUEUED operations queued"
source "$HERE/status-poll.sh"
status_open "$OBX_PORT" "$OBX_PID"
nginx -p "$RUN" -e "$RUN/upstream.err" -c "$RUN/upstream.conf" &
NGINX_PID=$!
PIDS+=("$NGINX_PID")
T0='' DONE0=0 TICKS0=0
for ((i = 0; i < 60000; i++)); do
  status_poll
  if [[ -z $T0 ]] && ((DONE > 0)); then T0=$AT DONE0=$DONE TICKS0=$TICKS; fi
  [[ -n $T0 ]] && ((BUSY == 0)) && break
  status_nap
done
T1=$AT COMPLETED=$DONE TICKS1=$TICKS
status_close
TIMED=$((COMPLETED - DONE0))
read -r DRAIN CPU_US < <(awk -v n="$TIMED" -v t0="$T0" -v t1="$T1" -v c="$((TICKS1 - TICKS0))" -v hz="$(getconf CLK_TCK)" \
  'BEGIN { if (n > 0 && t1 > t0) printf "%.0f %.1f\n", n / (t1 - t0), c * 1e6 / hz / n; else print "? ?" }')
kill "$OBX_PID"; wait "$OBX_PID" 2>/dev/null || true
# The drain's ceiling on this machine: the same nginx, POSTed to by wrk over as many
# connections as the drain had lanes in flight (1 unkeyed: a lane waits for each answer before
# it sends the next, so no drain beats one connection's round trips; min(keys, 8) keyed, 8
# being the default maxConcurrentPerOrigin). Outbox is stopped by now.
LANES=1
((KEYS > 0)) && LANES=$((KEYS < 8 ? KEYS : 8))
log "(b) ceiling: wrk -t1 -c$LANES -d${CEILING_DURATION}s into the same nginx"
wrk -t1 -c"$LANES" -d"${CEILING_DURATION}s" -s "$HERE/post-1k.lua" "http://127.0.0.1:$UP_PORT/echo" >"$RUN/wrk-ceiling.txt"
CEILING=$(awk '/Requests\/sec/ {printf "%.0f", $2}' "$RUN/wrk-ceiling.txt")
else
  kill "$OBX_PID"; wait "$OBX_PID" 2>/dev/null || true
fi
fi

# ---- (c) a million queued operations: restart time and memory
if ((OPS_1M > 0)); then
  log "(c) queueing $OPS_1M operations (upstream down), then kill -9 and restart"
  # nginx, if (b) started it: the upstream must be down again
  [[ -z ${NGINX_PID:-} ]] || { kill "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; }
  start_outbox "$RUN/data-c"
  while (( $(count "c['pending']") < OPS_1M )); do
    wrk -t2 -c"$CONNS" -d5s -s "$HERE/post-1k.lua" "http://127.0.0.1:$OBX_PORT/echo" >/dev/null
  done
  HELD=$(count "c['pending']")
  BEFORE_RSS=$(rss_mb "$OBX_PID" VmHWM)
  kill -9 "$OBX_PID"; wait "$OBX_PID" 2>/dev/null || true
  start_outbox "$RUN/data-c"
  RESTART=$STARTED
  RESTART_RSS=$(rss_mb "$OBX_PID" VmRSS)
  RESTART_HWM=$(rss_mb "$OBX_PID" VmHWM)
  DISK=$(du -sm "$RUN/data-c" | cut -f1)
fi

echo
echo "# queue benchmark, $(date -u +%FT%TZ), $(nproc) CPUs, data on $(findmnt -no SOURCE -T "$RUN" 2>/dev/null || echo '?')"
if ((SKIP_AB == 0)); then
printf '(a) durable 202/s   %8s req/s  p50 %s  p99 %s  non-2xx %s  (wrk -c%s -d%ss, %s queued)\n' "$RPS" "$P50" "$P99" "${NON2XX:-0}" "$CONNS" "$DURATION" "$QUEUED"
printf '    Outbox CPU per durable 202: %s µs (utime+stime / requests)\n' "$OBX_CPU"
python3 - "$RUN/commit-0.txt" "$RUN/commit-1.txt" "$T0_A" "$T1_A" <<'PY'
import sys
def read(path):
    return {line.split()[0]: float(line.split()[1]) for line in open(path) if line.strip()}
before, after = read(sys.argv[1]), read(sys.argv[2])
span = float(sys.argv[4]) - float(sys.argv[3])
delta = {name: after[name] - before.get(name, 0) for name in after}
syncs = delta.get("outbox_storage_syncs_total", 0)
if syncs > 0:
    print(f"    group commit: {syncs / span:.0f} fdatasyncs/s, {delta['outbox_storage_synced_records_total'] / syncs:.1f} records each, "
          f"{delta['outbox_storage_sync_seconds_total'] / syncs * 1e6:.0f} µs per write+sync, disk busy {delta['outbox_storage_sync_seconds_total'] / span * 100:.0f} % of the time; "
          f"per batch: oldest record waited {delta['outbox_storage_batch_wait_seconds_total'] / syncs * 1e6:.0f} µs for its write, "
          f"its completions took {delta['outbox_storage_completion_seconds_total'] / syncs * 1e6:.0f} µs")
    # The sync histogram (binaries from before it have none): where 99 % of the syncs end, and the slowest.
    buckets = sorted((float(name.split('"')[1]), count) for name, count in delta.items()
                     if name.startswith("outbox_storage_sync_duration_seconds_bucket") and '+Inf' not in name)
    if buckets:
        p99 = next((bound for bound, count in buckets if count >= 0.99 * syncs), None)
        slowest = next((bound for bound, count in buckets if count >= syncs), None)
        label = lambda bound: f"≤ {bound * 1e3:g} ms" if bound is not None else "> the last bucket"
        print(f"    write+sync durations: 99 % {label(p99)}, the slowest {label(slowest)}")
PY
echo "    same disk, fsync-limit.c (records/s):"
awk -F'|' '$2 ~ /rename|append|group64/ {gsub(/ /, "", $2); gsub(/ /, "", $3); printf "      %-8s %s\n", $2, $3}' "$RUN/fsync.txt"
# Group commit's yardstick: what this disk gives in batches of 64 records per fdatasync, measured
# in this run (the disk's speed drifts between runs; the ratio is what compares).
GROUP64=$(awk -F'|' '$2 ~ /group64/ {gsub(/ /, "", $3); print $3}' "$RUN/fsync.txt")
if [[ -n $GROUP64 && $GROUP64 != 0 ]]; then
  printf 'durable 202/s: %.0f (%.2f × group-of-64 limit %s)\n' "$RPS" "$(python3 -c "print($RPS / $GROUP64)")" "$GROUP64"
fi
printf 'nginx 202 (no storage): %s req/s, %s µs CPU per 202; durable 202/s %.2f × that\n' "$NGINX202" "$NGINX_CPU" \
  "$(python3 -c "print($RPS / $NGINX202)")"
if ((SKIP_DRAIN == 0)); then
printf '(b) drain           %8s ops/s  %s µs CPU/op  (%s operations replayed into nginx, %s timed from the first completion to the last, %s)\n' \
  "$DRAIN" "$CPU_US" "$COMPLETED" "$TIMED" "$( ((KEYS > 0)) && echo "over $KEYS ordering keys" || echo "no ordering keys: one lane")"
printf '    ceiling: wrk over %s connection(s) into the same nginx: %s req/s; the drain reached %s of it\n' "$LANES" "$CEILING" \
  "$(awk -v d="$DRAIN" -v c="$CEILING" 'BEGIN { if (c > 0 && d + 0 > 0) printf "%.2f", d / c; else print "?" }')"
fi
fi
if ((OPS_1M > 0)); then
  printf '(c) %s queued: restart %ss to listening; RSS after restart %s MB (peak %s MB); before kill peak %s MB; %s MB on disk\n' \
    "$HELD" "$RESTART" "$RESTART_RSS" "$RESTART_HWM" "$BEFORE_RSS" "$DISK"
fi

#!/usr/bin/env bash
# A large queue at rest: OPS queued 1 KiB operations, the upstream down. What Outbox costs
# while it only waits (its CPU over IDLE seconds: the periodic maintenance, retention and TTL
# sweeps and compaction), and what a client writing meanwhile sees: the latency of durable
# POSTs sent one at a time on one connection (wrk -c1 for LAT_DURATION seconds).
#
#   Benchmarks/queue-at-rest.sh                        # build (release), 600 000 queued (~2 min a binary)
#   OPS=200000 OUTBOX_BIN=/path/to/outbox Benchmarks/queue-at-rest.sh
#   OUTBOX_BIN=new OUTBOX_BASELINE_BIN=old Benchmarks/queue-at-rest.sh   # old, then new
#
# Each binary fills its own queue (wrk POSTing until OPS are pending; the last round may
# overshoot by a few seconds' worth, and queue.maxOperations, 1 000 000 by default, must stay
# above what is held, or the latency run measures `507`s) and is measured in the same process,
# from SETTLE seconds after the fill: the maintenance that runs every second and every 30 s,
# not a restart (a restart sizes the index for what it recovered, and its first growth after
# that is measured as a stall of its own).
#
# Knobs (env): OPS=600000 IDLE=30 LAT_DURATION=30 (both a whole compaction interval) SETTLE=3 BASE_PORT=19600 (upstream, never
# started; outbox +3) OUTBOX_BIN OUTBOX_BASELINE_BIN START_TIMEOUT=60
# Loopback only; every process started here is stopped on exit; data lives in a temp dir.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OPS=${OPS:-600000}
IDLE=${IDLE:-30}
LAT_DURATION=${LAT_DURATION:-30}
SETTLE=${SETTLE:-3}
START_TIMEOUT=${START_TIMEOUT:-60}
BASE_PORT=${BASE_PORT:-19600}
DOWN_PORT=$BASE_PORT OBX_PORT=$((BASE_PORT + 3))
RUN=$(mktemp -d /tmp/restbench.XXXXXX)
OBX_PID=

# shellcheck source=Benchmarks/outbox-bins.sh
source "$HERE/outbox-bins.sh"

for n in OPS IDLE LAT_DURATION SETTLE; do [[ ${!n} =~ ^[1-9][0-9]*$ ]] || die "$n=${!n} is not a positive number"; done
need_tools wrk curl python3
need_free_ports "$OBX_PORT" "$DOWN_PORT"
select_binaries

ticks() { awk '{print $14 + $15}' "/proc/$OBX_PID/stat"; }

declare -a LINES=()
HELD=0 DISK=0
for i in "${!BINS[@]}"; do
  log "${NAMES[$i]}: filling $OPS operations (upstream down)"
  rm -rf "$RUN/data"
  start_outbox "${BINS[$i]}" "$RUN/data"
  while (($(pending) < OPS)); do
    wrk -t2 -c64 -d5s -s "$HERE/post-1k.lua" "http://127.0.0.1:$OBX_PORT/echo" >/dev/null
  done
  HELD=$(pending) DISK=$(du -sm "$RUN/data" | cut -f1)
  sleep "$SETTLE"
  t0=$(ticks)
  sleep "$IDLE"
  idle=$(($(ticks) - t0))
  log "${NAMES[$i]}: latency of single durable POSTs (wrk -c1 -d${LAT_DURATION}s)"
  wrk -t1 -c1 -d"${LAT_DURATION}s" --latency -s "$HERE/post-1k.lua" "http://127.0.0.1:$OBX_PORT/echo" >"$RUN/wrk.txt"
  non2xx=$(awk '/Non-2xx/ {print $5}' "$RUN/wrk.txt")
  LINES+=("$(printf '%-8s %s queued (%s MB): idle CPU %4.1f %% of a core; single durable POSTs %s/s, p50 %s, p99 %s, max %s, non-2xx %s' \
    "${NAMES[$i]}" "$HELD" "$DISK" "$(python3 -c "print($idle / $(getconf CLK_TCK) / $IDLE * 100)")" \
    "$(awk '/Requests\/sec/ {printf "%.0f", $2}' "$RUN/wrk.txt")" "$(awk '$1 == "50%" {print $2}' "$RUN/wrk.txt")" \
    "$(awk '$1 == "99%" {print $2}' "$RUN/wrk.txt")" "$(awk '/Latency/ {print $4; exit}' "$RUN/wrk.txt")" "${non2xx:-0}")")
  stop_outbox
done

echo
echo "# queue at rest, $(date -u +%FT%TZ), $(nproc) CPUs, idle ${IDLE}s from ${SETTLE}s after the last fill, then wrk -c1 -d${LAT_DURATION}s"
printf '%s\n' "${LINES[@]}"

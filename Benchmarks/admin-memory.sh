#!/usr/bin/env bash
# Admin answers bounded in memory (SPEC §6): Outbox's resident-set growth (VmRSS and VmHWM from
# /proc) for
#   (a) VIEWERS (30) concurrent views of one operation with a BODY_MIB (10) MiB body
#       (acceptance: ≤ +100 MB; main: +741 MB), and
#   (b) a bulk delete of OPS (1 000 000) pending operations, DELETE /admin/operations?status=pending
#       (acceptance: ≤ +60 MB; main: 1.1 GB for 267 000, never returned).
# The peak is VmHWM after a reset (`echo 5 > /proc/PID/clear_refs`) just before the step, so it
# is the step's own peak, not start-up's; "after" is VmRSS SETTLE seconds after the step.
#
#   Benchmarks/admin-memory.sh                       # build (release), both parts (~3-6 min)
#   OPS=200000 Benchmarks/admin-memory.sh            # a smaller queue for (b)
#   PARTS=views OUTBOX_BIN=/path/to/outbox Benchmarks/admin-memory.sh
#   OUTBOX_BIN=new OUTBOX_BASELINE_BIN=old Benchmarks/admin-memory.sh   # old, then new
#
# The queue is filled with the upstream down (its port is never listened on): (a) one POST of a
# binary body, (b) admin-memory-client.py POSTing small bodies over 64 keep-alive connections,
# 8 pipelined on each. queue.maxOperations is raised above OPS for (b).
# Knobs (env): PARTS="views delete" VIEWERS=30 BODY_MIB=10 OPS=1000000 SETTLE=3 BASE_PORT=19700
# (upstream, never started; outbox +3) OUTBOX_BIN OUTBOX_BASELINE_BIN START_TIMEOUT=120
# Loopback only; every process started here is stopped by its pid on exit; data lives in a temp dir.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PARTS=${PARTS:-"views delete"}
VIEWERS=${VIEWERS:-30}
BODY_MIB=${BODY_MIB:-10}
OPS=${OPS:-1000000}
SETTLE=${SETTLE:-3}
START_TIMEOUT=${START_TIMEOUT:-120}
BASE_PORT=${BASE_PORT:-19700}
DOWN_PORT=$BASE_PORT OBX_PORT=$((BASE_PORT + 3))
RUN=$(mktemp -d /tmp/adminmem.XXXXXX)
OBX_PID=

# shellcheck source=Benchmarks/outbox-bins.sh
source "$HERE/outbox-bins.sh"

for n in VIEWERS BODY_MIB OPS SETTLE; do [[ ${!n} =~ ^[1-9][0-9]*$ ]] || die "$n=${!n} is not a positive number"; done
for part in $PARTS; do [[ $part == views || $part == delete ]] || die "PARTS: unknown part $part (views, delete)"; done
need_tools curl python3
need_free_ports "$OBX_PORT" "$DOWN_PORT"
select_binaries

# queue.maxOperations above OPS, for (b).
printf '{"queue": {"maxOperations": %d}}\n' $((OPS + OPS / 10 + 1000)) >"$RUN/config.json"

kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$OBX_PID/status"; }  # VmRSS, VmHWM in KiB
reset_peak() { echo 5 >"/proc/$OBX_PID/clear_refs"; }
mb() { awk -v k="$1" 'BEGIN {printf "%.0f", k / 1024}'; }
growth() { awk -v k="$1" 'BEGIN {printf "%+.0f", k / 1024}'; }

# Prints: before, peak, after (MB) and the growths, for the step run by "$@".
measure() {  # label, command...
  local label=$1 before peak after t0 t1
  shift
  before=$(kib VmRSS)
  reset_peak
  t0=$(date +%s.%N)
  "$@" >"$RUN/step.txt"
  t1=$(date +%s.%N)
  peak=$(kib VmHWM)
  sleep "$SETTLE"
  after=$(kib VmRSS)
  printf '%s: %s; %.1f s; RSS %s MB before, peak %s MB (%s MB), %s MB %ss after (%s MB)\n' "$label" \
    "$(tr -s ' \n' ' ' <"$RUN/step.txt" | sed 's/ *$//')" "$(echo "$t1 - $t0" | bc)" "$(mb "$before")" "$(mb "$peak")" \
    "$(growth $((peak - before)))" "$(mb "$after")" "$SETTLE" "$(growth $((after - before)))"
}

view_step() { python3 "$HERE/admin-memory-client.py" views "$OBX_PORT" "$1" "$VIEWERS"; }
delete_step() { curl -s -X DELETE "http://127.0.0.1:$OBX_PORT/admin/operations?status=pending"; echo; }

declare -a LINES=()
for i in "${!BINS[@]}"; do
  name=${NAMES[$i]}
  if [[ " $PARTS " == *" views "* ]]; then
    log "$name: (a) $VIEWERS concurrent views of a ${BODY_MIB} MiB operation"
    rm -rf "$RUN/data"
    start_outbox "${BINS[$i]}" "$RUN/data" --config "$RUN/config.json"
    head -c $((BODY_MIB << 20)) /dev/urandom >"$RUN/body.bin"
    id=$(curl -s -D - -o /dev/null --data-binary "@$RUN/body.bin" -H 'Content-Type: application/octet-stream' \
      "http://127.0.0.1:$OBX_PORT/items" | awk -F': ' 'tolower($1) == "outbox-operation-id" {print $2}' | tr -d '\r')
    [[ -n $id ]] || die "the ${BODY_MIB} MiB POST was not stored"
    view_step "$id" >/dev/null  # once, so that both runs read from the page cache
    LINES+=("$(measure "$(printf '%-8s (a) %2d views of %s MiB' "$name" "$VIEWERS" "$BODY_MIB")" view_step "$id")")
    stop_outbox
  fi
  if [[ " $PARTS " == *" delete "* ]]; then
    log "$name: (b) filling $OPS pending operations (upstream down)"
    rm -rf "$RUN/data"
    start_outbox "${BINS[$i]}" "$RUN/data" --config "$RUN/config.json"
    python3 "$HERE/admin-memory-client.py" fill "$OBX_PORT" "$OPS" >&2
    held=$(pending)
    ((held >= OPS)) || die "only $held of $OPS operations stored"
    sleep "$SETTLE"
    log "$name: (b) bulk delete of $held operations"
    LINES+=("$(measure "$(printf '%-8s (b) bulk delete of %d' "$name" "$held")" delete_step)")
    left=$(pending)
    LINES+=("$(printf '%-8s     pending after the delete: %s' "$name" "$left")")
    stop_outbox
  fi
done

echo
echo "# admin memory, $(date -u +%FT%TZ), $(nproc) CPUs, release build; peak = VmHWM reset before each step"
printf '%s\n' "${LINES[@]}"

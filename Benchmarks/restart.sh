#!/usr/bin/env bash
# Restart with a million queued operations: time from exec to the "listening" line, the CPU
# the process spent until then, and its memory, over RUNS restarts of the same data.
#
#   Benchmarks/restart.sh                          # build (release), 5 restarts
#   RUNS=9 OUTBOX_BIN=/path/to/outbox Benchmarks/restart.sh
#   OUTBOX_BIN=new OUTBOX_BASELINE_BIN=old Benchmarks/restart.sh   # interleaved: old new old new ...
#   OPS=200000 DATA=/tmp/restart-200k Benchmarks/restart.sh
#   CACHE=warm Benchmarks/restart.sh               # no root: warm page cache only
#
# The data (OPS queued 1 KiB POSTs, upstream down, then kill -9) is built once per binary, by
# that binary, into DATA/<the first 12 hex digits of the binary's SHA-256> (DATA: default
# /work/bench/restart-1m-data, else $TMPDIR/outbox-restart-1m-data) and reused while it exists:
# filling it takes half a minute or more. Each binary restarts on data in its own format: a
# binary that writes a newer frame version would otherwise migrate the older binary's segments
# at every restart, and measure the migration. Each restart runs on a copy that hard-links the sealed segments and
# copies only the newest one, the only file a restart writes to (the replayer's failed attempt
# on the down upstream appends there); no segment is compacted in the second before it is
# killed. The script checks after every run that the cached files are unchanged in size.
#
# CACHE says which page cache a restart meets: "cold" drops it first (sync, then
# /proc/sys/vm/drop_caches, so root: the segments are read from the disk, as after a reboot),
# "warm" restarts right after the previous run read the same files (hard links share their
# cached pages, as after a crash of the process alone). The default "cold warm" measures both
# in every run and reports each separately. A virtual machine's disk may still be cached by
# its host: cold here means the guest's cache.
#
# Loopback only; every process started here is stopped on exit; copies live in a temp dir.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
RUNS=${RUNS:-5}
OPS=${OPS:-1000000}
CONNS=${CONNS:-64}
if [[ -z ${DATA:-} ]]; then
  if [[ -d /work/bench ]]; then DATA=/work/bench/restart-1m-data; else DATA=${TMPDIR:-/tmp}/outbox-restart-1m-data; fi
fi
BASE_PORT=${BASE_PORT:-19200}
OBX_PORT=$BASE_PORT DOWN_PORT=$((BASE_PORT + 1))  # nothing listens on DOWN_PORT: the upstream is down
START_TIMEOUT=${START_TIMEOUT:-60}
CACHE=${CACHE:-cold warm}
RUN=$(mktemp -d /tmp/restartbench.XXXXXX)
OBX_PID=

# shellcheck source=Benchmarks/outbox-bins.sh
source "$HERE/outbox-bins.sh"

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS=$RUNS is not a positive number"
[[ $OPS =~ ^[1-9][0-9]*$ ]] || die "OPS=$OPS is not a positive number"
read -ra MODES <<<"$CACHE"
((${#MODES[@]})) || die "CACHE is empty: say cold, warm or both"
for m in "${MODES[@]}"; do
  [[ $m == cold || $m == warm ]] || die "CACHE=$CACHE: \"$m\" is neither cold nor warm"
  if [[ $m == cold && ! -w /proc/sys/vm/drop_caches ]]; then
    die "CACHE=$CACHE needs root to drop the page cache (/proc/sys/vm/drop_caches); CACHE=warm measures without"
  fi
done
need_tools wrk curl python3
need_free_ports "$OBX_PORT" "$DOWN_PORT"
select_binaries

start_outbox() {  # binary, data dir; sets OBX_PID, STARTED (s to the listening line), CPU (s of utime+stime then)
  local t0 t1 i
  # Emptied here, not by the child's redirection: a look before the child opens the file would
  # find the previous run's listening line.
  : >"$RUN/outbox.err"
  t0=$(date +%s%N)
  "$1" --listen "127.0.0.1:$OBX_PORT" --upstream "http://127.0.0.1:$DOWN_PORT" --data-dir "$2" \
    --log-level warn >"$RUN/outbox.out" 2>"$RUN/outbox.err" &
  OBX_PID=$!
  while ! grep -q "outbox listening on" "$RUN/outbox.err" 2>/dev/null; do
    kill -0 "$OBX_PID" 2>/dev/null || { cat "$RUN/outbox.err" >&2; die "outbox exited before listening"; }
    (($(date +%s%N) - t0 < START_TIMEOUT * 1000000000)) || { cat "$RUN/outbox.err" >&2; die "outbox not listening after ${START_TIMEOUT}s"; }
    sleep 0.002
  done
  t1=$(date +%s%N)
  # Fields 14 and 15 of /proc/PID/stat (utime, stime) in clock ticks; the name in field 2 has no spaces.
  CPU=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$OBX_PID/stat")
  STARTED=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1e9}')
}

stop_outbox() {  # kill -9, as a crash would
  kill -9 "$OBX_PID" 2>/dev/null || true
  wait "$OBX_PID" 2>/dev/null || true
  OBX_PID=
}

pending() {
  curl -sf "http://127.0.0.1:$OBX_PORT/admin/status" | python3 -c "import json,sys; print(json.load(sys.stdin)['counts']['pending'])"
}

rss_mb() { awk -v k="$2" '$1 == k":" {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }

sizes() { (cd "$1" && find . -type f -printf '%p %s\n' | sort); }

# ---- the data, once per binary
declare -A SOURCE
for b in "${!BINS[@]}"; do
  dir=$DATA/$(sha256sum "${BINS[$b]}" | cut -c1-12)
  SOURCE[$b]=$dir
  [[ -f $dir/.complete ]] && continue
  log "filling $dir with $OPS queued 1 KiB operations by ${NAMES[$b]} (once; later runs reuse it)"
  rm -rf "$dir"
  mkdir -p "$DATA"
  start_outbox "${BINS[$b]}" "$dir"
  while (($(pending) < OPS)); do
    wrk -t2 -c"$CONNS" -d5s -s "$HERE/post-1k.lua" "http://127.0.0.1:$OBX_PORT/echo" >/dev/null
  done
  log "$(pending) queued; kill -9, then one restart to cut the torn tail"
  stop_outbox
  start_outbox "${BINS[$b]}" "$dir"
  stop_outbox
  touch "$dir/.complete"
done
for b in "${!BINS[@]}"; do sizes "${SOURCE[$b]}" >"$RUN/sizes.$b"; done
SEGMENT_MB=$(find "${SOURCE[0]}" -name '*.log' -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s / 1048576}')

copy_data() {  # from $1 into $2: sealed segments hard-linked, the newest segment copied
  local newest f
  mkdir -m 0700 "$2"
  newest=$(cd "$1" && find . -maxdepth 1 -name '*.log' -printf '%f\n' | sort | tail -1)
  for f in "$1"/*; do
    [[ $(basename "$f") == "$newest" ]] && continue
    ln "$f" "$2/"
  done
  cp -p "$1/$newest" "$2/"
}

drop_caches() { sync && echo 3 >/proc/sys/vm/drop_caches; }

# ---- restarts
log "restarting ${#BINS[@]} binary(ies) $RUNS times each, each on its own data in $DATA ($SEGMENT_MB MB of segments), page cache: ${MODES[*]}"
# A warm measurement needs a run before it that read the files: one unmeasured start each.
if [[ ${MODES[0]} == warm ]]; then
  for b in "${!BINS[@]}"; do
    copy_data "${SOURCE[$b]}" "$RUN/data" && start_outbox "${BINS[$b]}" "$RUN/data" && stop_outbox && rm -rf "$RUN/data"
  done
fi
declare -A TIMES CPUS RSS HWM
for ((r = 1; r <= RUNS; r++)); do
  for b in "${!BINS[@]}"; do
    for m in "${MODES[@]}"; do
      copy_data "${SOURCE[$b]}" "$RUN/data"
      [[ $m == cold ]] && drop_caches
      start_outbox "${BINS[$b]}" "$RUN/data"
      rss=$(rss_mb "$OBX_PID" VmRSS) hwm=$(rss_mb "$OBX_PID" VmHWM)
      stop_outbox
      rm -rf "$RUN/data"
      sizes "${SOURCE[$b]}" | cmp -s - "$RUN/sizes.$b" || die "the cached data in ${SOURCE[$b]} changed during run $r: delete it and run again"
      printf '%-8s %s run %d: listening after %ss, cpu %ss, RSS %s MB, peak %s MB\n' "${NAMES[$b]}" "$m" "$r" "$STARTED" "$CPU" "$rss" "$hwm"
      k="$b $m"
      TIMES[$k]+="$STARTED " CPUS[$k]+="$CPU " RSS[$k]+="$rss " HWM[$k]+="$hwm "
    done
  done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo
echo "# restart benchmark, $(date -u +%FT%TZ), $(nproc) CPUs, $(grep -c . <<<"$(cd "${SOURCE[0]}" && ls ./*.log)") segments, $SEGMENT_MB MB, $RUNS runs"
for b in "${!BINS[@]}"; do
  for m in "${MODES[@]}"; do
    k="$b $m"
    printf '%-8s %s median: listening after %ss, cpu %ss, RSS %s MB, peak %s MB  (%s)\n' "${NAMES[$b]}" "$m" \
      "$(median <<<"${TIMES[$k]}")" "$(median <<<"${CPUS[$k]}")" "$(median <<<"${RSS[$k]}")" "$(median <<<"${HWM[$k]}")" "${BINS[$b]}"
  done
done

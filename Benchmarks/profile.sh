#!/usr/bin/env bash
# Where Outbox's CPU goes: `perf record -g` of the outbox process while wrk POSTs 1 KiB bodies
# through it, for each MODE:
#   forward  into a local nginx origin (upstream.conf): the forwarding path;
#   durable  with the upstream down: every POST is stored and answered 202, the queue's path.
# Prints, per mode, Outbox's CPU µs per request, its system calls per request (perf's
# raw_syscalls tracepoint, when the kernel offers it), the share of its samples by where they
# ran (kernel, Swift runtime, Outbox's code, libc, OpenSSL), and the hottest symbols.
#
#   Benchmarks/profile.sh                          # build outbox (release), both modes (~1 min)
#   MODES=durable OUTBOX_BIN=/path/to/outbox Benchmarks/profile.sh
#   DURATION=10 TOP=30 KEEP_RUNDIR=1 Benchmarks/profile.sh   # keeps <rundir>/<mode>.perf.data
#
# Knobs (env): MODES="forward durable"  DURATION=8 (s of wrk per mode; perf records the middle
#   DURATION-2 s)  CONNS=64  TOP=15 (symbols listed)  BASE_PORT=19500 (origin; outbox +3)
#   OUTBOX_BIN  INSTALL=0 (do not apt-get nginx, wrk, linux-perf)
# A profile is no benchmark: perf itself takes a few percent of the CPUs, so the rates printed
# here are below forward.sh's and queue.sh's; compare shares, not rates.
# Loopback only; every process started here is stopped by its process group on exit.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BENCH=profile
HOST=127.0.0.1
BASE_PORT=${BASE_PORT:-19500}
UP_PORT=$BASE_PORT NGX_PORT=$((BASE_PORT + 1)) OBX_PORT=$((BASE_PORT + 3)) DOWN_PORT=$((BASE_PORT + 2))
TARGETS=outbox
VALID_TARGETS=outbox
DURATION=${DURATION:-8}
MODES=${MODES:-"forward durable"}
TOP=${TOP:-15}
# shellcheck source=common.sh
source "$HERE/common.sh"

[[ $DURATION =~ ^[0-9]+$ ]] && ((DURATION >= 4)) || die "DURATION=$DURATION: give whole seconds, at least 4"
[[ $TOP =~ ^[0-9]+$ ]] || die "TOP=$TOP is not a number"
for m in $MODES; do [[ $m == forward || $m == durable ]] || die "MODES=$MODES: \"$m\" is neither forward nor durable"; done

install_missing nginx wrk curl
command -v perf >/dev/null || install_missing linux-perf
command -v perf >/dev/null || die "perf not found (Debian: linux-perf)"
check_ports_free "$UP_PORT" "$OBX_PORT" "$DOWN_PORT"
build_outbox
log "outbox binary: $OUTBOX_BIN ($OBX_DESC)"
make_rundir
TPORT=([outbox]=$OBX_PORT)

render "$HERE/upstream.conf" "$RUNDIR/upstream.conf"
start_bg upstream nginx -p "$RUNDIR" -e "$RUNDIR/upstream.err" -c "$RUNDIR/upstream.conf"
UP_PID=$STARTED; wait_port "$UP_PORT" "$UP_PID" 10

# Where a sample ran, from perf's dso column: the shares that say whether a change to
# Outbox's own code can matter.
classify() {
  awk -v bin="$(basename "$OUTBOX_BIN")" '
    /^#/ || NF < 2 { next }
    { pct = $1; sub(/%/, "", pct); dso = $2
      if (dso ~ /kernel/) k = "kernel"
      else if (dso ~ /libswift|libFoundation|libdispatch|libBlocksRuntime/) k = "Swift runtime and Foundation"
      else if (dso == bin) k = "Outbox"
      else if (dso ~ /libc\.so|libc-|libm\.so|ld-linux/) k = "libc"
      else if (dso ~ /libssl|libcrypto/) k = "OpenSSL"
      else k = "other (" dso ")"
      share[k] += pct }
    END { for (k in share) printf "  %5.1f %%  %s\n", share[k], k }' | sort -rn
}

profile() {  # mode
  local mode=$1 up pgid pid ticks0 ticks1 out reqs data=$RUNDIR/$1.perf.data sys=""
  if [[ $mode == forward ]]; then up="http://$HOST:$UP_PORT"; else up="http://$HOST:$DOWN_PORT"; fi
  start_outbox outbox "$OUTBOX_BIN" "$up"
  pid=${TPGID[outbox]}
  # A warm-up, also so the durable mode's reachability has seen the origin down.
  wrk -t2 -c"$CONNS" -d2s -s "$HERE/post-1k.lua" "http://$HOST:$OBX_PORT/echo" >/dev/null 2>&1 || true
  ticks0=$(group_ticks "$pid")
  wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --timeout 5s -s "$HERE/post-1k.lua" "http://$HOST:$OBX_PORT/echo" >"$RUNDIR/$mode.wrk" 2>&1 &
  local wrk_pid=$!
  sleep 1  # the measured window starts once wrk's connections are up
  local window=$((DURATION - 2))
  if perf stat -e raw_syscalls:sys_enter -p "$(pid_of_outbox "$pid")" -x, -o "$RUNDIR/$mode.sys" -- sleep 1 2>/dev/null; then
    sys=$(awk -F, '/raw_syscalls/ { print $1 }' "$RUNDIR/$mode.sys")
  fi
  perf record -q -g -p "$(pid_of_outbox "$pid")" -o "$data" -- sleep $((window - 1)) >/dev/null 2>&1
  wait "$wrk_pid" || die "wrk failed in mode $mode: $(cat "$RUNDIR/$mode.wrk")"
  ticks1=$(group_ticks "$pid")
  out=$(cat "$RUNDIR/$mode.wrk")
  reqs=$(awk '/requests in/ { print $1 }' <<<"$out")
  local rps errs non2xx
  rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
  errs=$(awk '/Socket errors/ { gsub(/,/, ""); print $4 + $6 + $8 + $10 }' <<<"$out")
  non2xx=$(awk '/Non-2xx/ { print $NF }' <<<"$out")
  # forward expects 201 from the origin, durable 202 from Outbox: both 2xx for wrk, so count
  # what Outbox stored to tell them apart.
  local stored
  stored=$(curl -sf --max-time 5 "http://$HOST:$OBX_PORT/admin/metrics" | awk '$1 == "outbox_enqueued_total" { print $2 }')
  if (( ${errs:-0} + ${non2xx:-0} > 0 )); then echo "$out" >&2; die "mode $mode: ${errs:-0} socket errors, ${non2xx:-0} non-2xx answers"; fi
  if [[ $mode == forward ]] && (( ${stored:-0} > 0 )); then die "mode forward: $stored requests were stored instead of forwarded"; fi
  if [[ $mode == durable ]] && (( ${stored:-0} < reqs )); then die "mode durable: only ${stored:-0} of $reqs requests were stored"; fi
  stop_pid "$pid"
  local kept=() p
  for p in "${PIDS[@]}"; do [[ $p == "$pid" ]] || kept+=("$p"); done
  PIDS=("${kept[@]}")

  echo
  echo "## $mode: wrk -c$CONNS POST 1 KiB, $DURATION s, $rps req/s under perf"
  awk -v a="$ticks0" -v b="$ticks1" -v r="$reqs" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "Outbox CPU: %.1f µs per request (all threads, user + system)\n", (b - a) * 1e6 / hz / r }'
  if [[ -n $sys ]]; then
    awk -v s="$sys" -v rps="$rps" 'BEGIN { printf "system calls: %.1f per request (raw_syscalls over 1 s / req/s)\n", s / rps }'
  else
    echo "system calls: not counted (perf has no raw_syscalls tracepoint; as root: mount -t tracefs nodev /sys/kernel/tracing)"
  fi
  echo "samples by where they ran:"
  perf report -i "$data" --no-children -g none --sort dso --stdio 2>/dev/null | classify
  echo "hottest symbols (self):"
  perf report -i "$data" --no-children -g none --sort dso,symbol --stdio 2>/dev/null |
    awk '/^#/ || NF < 3 { next } /%/ && $1 ~ /%$/ && n++ < '"$TOP"' { sub(/[ \t-]+$/, ""); print "  " $0 }'
}

# start_bg runs outbox under `env`, which execs it: the group leader is the outbox process.
pid_of_outbox() { echo "$1"; }

echo "# profile: $(date -u +%FT%TZ), $(nproc) CPUs, $OBX_DESC"
for m in $MODES; do profile "$m"; done

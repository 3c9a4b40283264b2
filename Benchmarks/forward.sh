#!/usr/bin/env bash
# Forward-path benchmark on loopback: direct-to-upstream vs nginx vs outbox
# [vs haproxy], GET 1 KiB and POST 1 KiB, targets interleaved, medians of REPS.
#
#   Benchmarks/forward.sh                               # build outbox (release), ~4 min
#   TARGETS="direct nginx haproxy outbox" Benchmarks/forward.sh
#   DURATION=3 REPS=1 Benchmarks/forward.sh             # smoke test, ~1.5 min
#   OUTBOX_BIN=/path/to/outbox Benchmarks/forward.sh    # skip the build
#   BASELINE_REV=main Benchmarks/forward.sh             # this tree's outbox vs main's
#   OUTBOX_BASELINE_BIN=/path/to/old/outbox Benchmarks/forward.sh
#
# Knobs (env): DURATION=10 (s per wrk run)  REPS=3  CONNS="64"  METHODS="GET POST"
#   THREADS=2 (wrk -t)  WORKERS=2 (nginx-proxy workers and haproxy nbthread)
#   NGX_KEEPALIVE=32 (nginx upstream keepalive per worker)  WARMUP=2 (s, per target
#   and method)  TARGETS="direct nginx outbox"  OUTBOX_BIN (pre-built binary; default:
#   `swift build -c release` in the repo)  OUTBOX_ARGS (extra flags for outbox)
#   START_TIMEOUT=30 (s for outbox to listen)  MAX_TOTAL_S (hard cap on the whole
#   matrix; default estimate+300)  RESULTS=<file> (copy raw TSV there)
#   KEEP_RUNDIR=1 (keep logs)  INSTALL=0 (never call apt-get)  BASE_PORT=19000
#   (upstream; nginx +1, haproxy +2, outbox +3: all must be free; outbox-base +4)
# Old vs new outbox in one run (to check that a change does not slow forwarding):
#   OUTBOX_BASELINE_BIN (a second outbox binary) or BASELINE_REV (a git revision,
#   built with `swift build -c release --product outbox` in a temporary `git worktree`
#   under /tmp, which is removed right after the build) adds the target outbox-base
#   after outbox: started exactly like outbox (same flags, its own data dir) on
#   BASE_PORT+4, interleaved with the others; the table gains rps/base and cpu/base
#   and a new/base line per method and connection count.
# What a credential rule costs (SPEC §10): CLIENT_RULE=1 starts the target outbox (not
#   outbox-base) with a config holding a `from: "client"` rule for the upstream's origin, and
#   has wrk send `Authorization: Bearer …` to every target, so outbox learns it on each
#   request. With BASELINE_REV: the rule's cost against a build without it, in one run.
# Everything listens on 127.0.0.1 only; everything started here is stopped by pid /
# own process-group id on exit, Ctrl-C or error.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BENCH=fwdbench
HOST=127.0.0.1
BASE_PORT=${BASE_PORT:-19000}
UP_PORT=$BASE_PORT NGX_PORT=$((BASE_PORT + 1)) HAP_PORT=$((BASE_PORT + 2)) OBX_PORT=$((BASE_PORT + 3))
OBX_BASE_PORT=$((BASE_PORT + 4))
TARGETS=${TARGETS:-"direct nginx outbox"}
CLIENT_RULE=${CLIENT_RULE:-0}
[[ $CLIENT_RULE == 1 ]] && AUTH_HEADER=${AUTH_HEADER:-"Bearer eyJhbGciOiJIUzI1NiJ9.bench-token-of-a-usual-length.c2lnbmF0dXJl"}
VALID_TARGETS="direct nginx haproxy outbox outbox-base"
# shellcheck source=common.sh
source "$HERE/common.sh"

# ---------------------------------------------------------------- main
tools=(nginx wrk curl)   # the upstream is always nginx
if wants haproxy; then tools+=(haproxy); fi
install_missing "${tools[@]}"
command -v curl >/dev/null || die "curl needed for sanity checks"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

TPORT=([direct]=$UP_PORT [nginx]=$NGX_PORT [haproxy]=$HAP_PORT [outbox]=$OBX_PORT [outbox-base]=$OBX_BASE_PORT)
TPGID=([direct]=0)

ports=("$UP_PORT" "$NGX_PORT" "$HAP_PORT" "$OBX_PORT")
if ((BASELINE)); then ports+=("$OBX_BASE_PORT"); fi
check_ports_free "${ports[@]}"

if wants outbox; then build_outbox; log "outbox binary: $OUTBOX_BIN"; fi
if ((BASELINE)); then build_baseline; log "outbox-base binary: $OUTBOX_BASELINE_BIN ($BASE_DESC)"; fi

make_rundir

n_t=${#ALL_TARGETS[@]}; n_m=$(wc -w <<<"$METHODS"); n_c=$(wc -w <<<"$CONNS")
EST=$(( n_m * n_c * REPS * n_t * (DURATION + 2) + n_m * n_t * (WARMUP + 1) + 20 ))
MAX_TOTAL_S=${MAX_TOTAL_S:-$((EST + 300))}
log "targets: ${ALL_TARGETS[*]}; methods: $METHODS; conns: $CONNS; reps: $REPS x ${DURATION}s; est. ${EST}s (cap ${MAX_TOTAL_S}s)"
log "rundir: $RUNDIR"

render "$HERE/upstream.conf" "$RUNDIR/upstream.conf"
start_bg upstream nginx -p "$RUNDIR" -e "$RUNDIR/upstream.err" -c "$RUNDIR/upstream.conf"
UP_PID=$STARTED; wait_port "$UP_PORT" "$UP_PID" 10
check_target direct "$UP_PORT"

for t in "${ALL_TARGETS[@]}"; do
  case $t in
    direct) ;;
    nginx)
      render "$HERE/nginx-proxy.conf" "$RUNDIR/nginx-proxy.conf"
      start_bg nginx nginx -p "$RUNDIR" -e "$RUNDIR/nginx-proxy.err" -c "$RUNDIR/nginx-proxy.conf"
      TPGID[nginx]=$STARTED; wait_port "$NGX_PORT" "$STARTED" 10 ;;
    haproxy)
      render "$HERE/haproxy.cfg" "$RUNDIR/haproxy.cfg"
      haproxy -c -q -f "$RUNDIR/haproxy.cfg" || die "haproxy config check failed"
      start_bg haproxy haproxy -db -f "$RUNDIR/haproxy.cfg"
      TPGID[haproxy]=$STARTED; wait_port "$HAP_PORT" "$STARTED" 10 ;;
    outbox)
      rule=()
      if [[ ${CLIENT_RULE:-0} == 1 ]]; then
        printf '{"replay": {"credentials": [{"origin": "http://%s:%s", "headers": ["authorization"], "from": "client"}]}}\n' \
          "$HOST" "$UP_PORT" >"$RUNDIR/outbox-rule.json"
        rule=(--config "$RUNDIR/outbox-rule.json")
      fi
      start_outbox outbox "$OUTBOX_BIN" "http://$HOST:$UP_PORT" "${rule[@]}" ;;
    outbox-base) start_outbox outbox-base "$OUTBOX_BASELINE_BIN" "http://$HOST:$UP_PORT" ;;
  esac
  check_target "$t" "${TPORT[$t]}"
  log "$t ok on $HOST:${TPORT[$t]}"
done

run_matrix run_wrk "$CONNS" 64 "${ALL_TARGETS[@]}"

[[ -n $RESULTS ]] && cp "$RAW" "$RESULTS"

# ---------------------------------------------------------------- summary
echo
echo "# forward benchmark: wrk -t$THREADS -d${DURATION}s, median of $REPS interleaved runs; $(nproc) CPUs shared by wrk+proxy+upstream"
echo "# upstream: nginx worker_processes 1; nginx-proxy workers=$WORKERS keepalive=$NGX_KEEPALIVE$(wants haproxy && echo "; haproxy nbthread=$WORKERS")$(wants outbox && echo "; outbox --log-level warn")"
if ((BASELINE)); then echo "# outbox: $OBX_DESC; outbox-base: $BASE_DESC"; fi
print_summary "outbox/nginx"

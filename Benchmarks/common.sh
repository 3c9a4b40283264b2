# shellcheck shell=bash disable=SC2034  # variables set here are read by the scripts that source this file
# What forward.sh and tls-upstream.sh share: the knobs they have in common, target lists with
# an optional baseline outbox, installing missing tools, building outbox (and a baseline
# revision), starting and stopping processes by process group, CPU accounting from /proc,
# running wrk, the pre-flight checks, the interleaved matrix and the summary table.
#
# Sourced, not run. The caller sets first: HERE ROOT HOST BENCH (the temp dirs' prefix),
# TARGETS (its default list) and VALID_TARGETS (every target it knows), and BASE_PORT and
# the ports derived from it; then sources this file, which reads the shared knobs, checks
# TARGETS, installs the EXIT/INT/TERM traps and defines the functions. Every process started
# through start_bg is stopped by its process-group id on exit, Ctrl-C or error.

DURATION=${DURATION:-10}
REPS=${REPS:-3}
CONNS=${CONNS:-"64"}
METHODS=${METHODS:-"GET POST"}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-2}
NGX_KEEPALIVE=${NGX_KEEPALIVE:-32}
WARMUP=${WARMUP:-2}
OUTBOX_BIN=${OUTBOX_BIN:-}
OUTBOX_ARGS=${OUTBOX_ARGS:-}
OUTBOX_BASELINE_BIN=${OUTBOX_BASELINE_BIN:-}
BASELINE_REV=${BASELINE_REV:-}
START_TIMEOUT=${START_TIMEOUT:-30}
INSTALL=${INSTALL:-1}
KEEP_RUNDIR=${KEEP_RUNDIR:-0}
RESULTS=${RESULTS:-}
AUTH_HEADER=${AUTH_HEADER:-}

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

read -r -a ALL_TARGETS <<<"$TARGETS"
wants() { [[ " ${ALL_TARGETS[*]} " == *" $1 "* ]]; }
for t in "${ALL_TARGETS[@]}"; do
  [[ " $VALID_TARGETS " == *" $t "* ]] || die "unknown target $t ($VALID_TARGETS)"
done
((${#ALL_TARGETS[@]})) || die "TARGETS is empty (choose from: $VALID_TARGETS)"
[[ -n $OUTBOX_BASELINE_BIN && -n $BASELINE_REV ]] && die "set OUTBOX_BASELINE_BIN or BASELINE_REV, not both"
BASELINE=0
[[ -n $OUTBOX_BASELINE_BIN || -n $BASELINE_REV ]] && BASELINE=1
if ((BASELINE)); then
  wants outbox || die "a baseline is measured against outbox, but TARGETS=\"$TARGETS\" has no outbox"
  if ! wants outbox-base; then  # right after outbox, so the pair runs back to back
    with_base=()
    for t in "${ALL_TARGETS[@]}"; do with_base+=("$t"); [[ $t == outbox ]] && with_base+=(outbox-base); done
    ALL_TARGETS=("${with_base[@]}")
  fi
elif wants outbox-base; then
  die "target outbox-base needs OUTBOX_BASELINE_BIN or BASELINE_REV"
fi
BASE_SHA=""
if [[ -n $BASELINE_REV ]]; then  # checked now, not after minutes of building
  BASE_SHA=$(git -C "$ROOT" rev-parse --verify --quiet "$BASELINE_REV^{commit}") \
    || die "BASELINE_REV=$BASELINE_REV is not a commit in $ROOT"
fi
TW=8  # width of the target name in log lines
for t in "${ALL_TARGETS[@]}"; do ((${#t} <= TW)) || TW=${#t}; done

# ---------------------------------------------------------------- install
install_missing() {  # command... (each is also the name of its Debian package)
  local need=() c
  for c in "$@"; do command -v "$c" >/dev/null || need+=("$c"); done
  ((${#need[@]})) || return 0
  [[ $INSTALL == 1 ]] || die "missing: ${need[*]} (INSTALL=0)"
  [[ $(id -u) == 0 ]] || die "missing ${need[*]}; run as root or install them"
  log "installing from Debian: ${need[*]}"
  # keep apt from starting/enabling them as services (we run private instances)
  local made_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 apt-get update -q >/dev/null
  timeout 600 apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
  ((made_policy)) && rm -f /usr/sbin/policy-rc.d
  local s
  for s in nginx haproxy; do
    if [[ " ${need[*]} " == *" $s "* ]] && command -v systemctl >/dev/null; then
      systemctl disable "$s.service" >/dev/null 2>&1 || true
    fi
  done
}

# ---------------------------------------------------------------- build
# Built before anything is started or timed: `swift run` would compile inside the
# measurement window.
release_build() {  # package-dir knob-that-skips-this-build (named in the error) ; sets BUILT_BIN
  local dir=$1 out rc=0
  command -v swift >/dev/null || export PATH=/opt/swift/usr/bin:$PATH
  command -v swift >/dev/null || die "swift not found (PATH, /opt/swift/usr/bin); or set $2"
  log "building outbox: swift build -c release --product outbox (in $dir)"
  out=$(cd "$dir" && timeout 1200 swift build -c release --product outbox 2>&1) || rc=$?
  ((rc == 0)) || { tail -40 <<<"$out" >&2; die "swift build failed in $dir (exit $rc)"; }
  BUILT_BIN=$(cd "$dir" && swift build -c release --show-bin-path)/outbox
  [[ -x $BUILT_BIN ]] || die "no binary at $BUILT_BIN after the build"
}

given_binary() {  # knob-name: true when the knob names a binary (it must be executable), false when unset
  local bin=${!1}
  [[ -n $bin ]] || return 1
  [[ -x $bin ]] || die "$1=$bin is not an executable"
}

OBX_DESC="" BASE_DESC=""
build_outbox() {
  if given_binary OUTBOX_BIN; then OBX_DESC=$OUTBOX_BIN; return 0; fi
  release_build "$ROOT" OUTBOX_BIN
  OUTBOX_BIN=$BUILT_BIN
  OBX_DESC="$ROOT at $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo '?')"
  # only what is compiled: edits to docs or to this script do not change the binary
  if [[ -n $(git -C "$ROOT" status --porcelain -- Package.swift Sources 2>/dev/null || true) ]]; then
    OBX_DESC+=" + uncommitted changes to Sources"
  fi
}

# The baseline revision is built in its own worktree (the caller's checkout is left
# alone); only the binary is kept, in BASE_TMP, and the worktree goes as soon as it is
# built, so nothing of it is around while measuring.
BASE_TMP="" BASE_WT=""
build_baseline() {
  if given_binary OUTBOX_BASELINE_BIN; then BASE_DESC=$OUTBOX_BASELINE_BIN; return 0; fi
  local sha=$BASE_SHA
  BASE_TMP=$(mktemp -d "/tmp/$BENCH-base.XXXXXX")
  BASE_WT=$BASE_TMP/outbox-${sha:0:12}
  git -C "$ROOT" worktree add --detach --quiet "$BASE_WT" "$sha" >&2 \
    || die "git worktree add $BASE_WT $sha failed"
  release_build "$BASE_WT" OUTBOX_BASELINE_BIN
  cp "$BUILT_BIN" "$BASE_TMP/outbox"
  remove_base_worktree
  OUTBOX_BASELINE_BIN=$BASE_TMP/outbox
  BASE_DESC="$BASELINE_REV = ${sha:0:12}"
}
remove_base_worktree() {
  [[ -n $BASE_WT ]] || return 0
  if ! { [[ -e $BASE_WT ]] && git -C "$ROOT" worktree remove --force "$BASE_WT" 2>/dev/null; }; then
    rm -rf "$BASE_WT"
    git -C "$ROOT" worktree prune 2>/dev/null || true  # forgets worktrees whose directory is gone
  fi
  BASE_WT=""
}

# ---------------------------------------------------------------- processes
declare -a PIDS=()
declare -A PNAME=()
declare -A TPORT=() TPGID=()  # per target: its port, and its process group (0: nothing to measure)
RUNDIR=""
STARTED=""

is_running() {  # alive and not a zombie
  local st
  [[ -r /proc/$1/stat ]] || return 1
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [[ -n $st && $st != Z ]]
}
pgid_of() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f3; }

start_bg() {  # name cmd... ; sets STARTED=pid (pid == its own process-group id)
  local name=$1; shift
  setsid "$@" >"$RUNDIR/$name.log" 2>&1 </dev/null &
  STARTED=$!
  PIDS+=("$STARTED"); PNAME[$STARTED]=$name
}

stop_pid() {
  local pid=$1 i grp=0
  [[ $(pgid_of "$pid" || true) == "$pid" ]] && grp=1
  if is_running "$pid"; then
    if ((grp)); then kill -TERM -- "-$pid" 2>/dev/null || true; else kill -TERM "$pid" 2>/dev/null || true; fi
    for ((i = 0; i < 50; i++)); do is_running "$pid" || break; sleep 0.1; done
  fi
  # leader is our child and not reaped yet, so its pid/pgid cannot have been reused
  if ((grp)); then
    kill -KILL -- "-$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do group_alive "$pid" || break; sleep 0.1; done  # let members exit
  else
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
group_alive() {  # any non-zombie process left in process group $1?
  cat /proc/[0-9]*/stat 2>/dev/null |
    awk -v g="$1" '{ sub(/^.*\) /, ""); if ($3 == g && $1 != "Z") f = 1 } END { exit !f }'
}

cleanup() {
  local rc=$? pid
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  remove_base_worktree
  [[ -n $BASE_TMP ]] && rm -rf "$BASE_TMP"
  if [[ -n $RUNDIR && -d $RUNDIR ]]; then
    if [[ $KEEP_RUNDIR == 1 || $rc != 0 ]]; then log "logs kept in $RUNDIR"; else rm -rf "$RUNDIR"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

check_ports_free() {  # port...
  local p
  for p in "$@"; do
    port_open "$p" && die "$HOST:$p is already in use; stop whatever listens there first"
  done
  return 0
}

wait_port() {  # port pid timeout_s [hint]
  local port=$1 pid=$2 t=$3 hint=${4:-} i
  for ((i = 0; i < t * 10; i++)); do
    port_open "$port" && return 0
    is_running "$pid" || { tail -20 "$RUNDIR/${PNAME[$pid]}.log" >&2 || true; die "${PNAME[$pid]} exited before listening on $port$hint"; }
    sleep 0.1
  done
  tail -20 "$RUNDIR/${PNAME[$pid]}.log" >&2 || true
  die "${PNAME[$pid]} not listening on $HOST:$port after ${t}s$hint"
}

make_rundir() {  # sets RUNDIR, RAW, BODY1K and writes body1k.json
  RUNDIR=$(mktemp -d "/tmp/$BENCH.XXXXXX")
  chmod 755 "$RUNDIR"   # nginx workers run as nobody and may need their temp dirs
  RAW=$RUNDIR/results.tsv
  BODY1K=$(head -c 768 /dev/urandom | base64 -w0 | tr '+/' 'ab' | head -c 1024)
  [[ ${#BODY1K} == 1024 ]] || die "body generation failed"
  printf '{"data":"%s"}' "$(head -c 1013 /dev/zero | tr '\0' x)" >"$RUNDIR/body1k.json"
}

render() {  # template -> rendered file
  sed -e "s|@RUNDIR@|$RUNDIR|g" -e "s|@UP_PORT@|$UP_PORT|g" -e "s|@NGX_PORT@|$NGX_PORT|g" \
      -e "s|@HAP_PORT@|${HAP_PORT:-}|g" -e "s|@WORKERS@|$WORKERS|g" -e "s|@BODY1K@|$BODY1K|g" \
      -e "s|@NGX_KEEPALIVE@|$NGX_KEEPALIVE|g" "$1" >"$2"
}

# Only flags and a private data dir: a config named by the caller's environment must
# not change what is measured. Logging at warn, as nginx/haproxy log nothing per request.
# The baseline is started by this same function, so old and new differ only in the binary.
start_outbox() {  # target binary upstream-url-or-empty [more flags...]
  local name=$1 bin=$2 up=$3
  shift 3
  local flags=(--listen "$HOST:${TPORT[$name]}" --data-dir "$RUNDIR/$name-data" --log-level warn "$@")
  [[ -n $up ]] && flags+=(--upstream "$up")
  # shellcheck disable=SC2086  # OUTBOX_ARGS is a list of flags
  start_bg "$name" env -u OUTBOX_CONFIG -u OUTBOX_ADMIN_TOKEN "$bin" serve "${flags[@]}" $OUTBOX_ARGS
  TPGID[$name]=$STARTED
  IS_OUTBOX[$name]=1
  wait_port "${TPORT[$name]}" "$STARTED" "$START_TIMEOUT" " (does this build of outbox implement the proxy yet?)"
}

# Targets that are an Outbox: their /admin/metrics say whether a request was stored (a 202,
# which wrk counts as a success) instead of forwarded.
declare -A IS_OUTBOX=()
stored_total() {  # target -> outbox_enqueued_total, or 0 for a target that is no Outbox
  [[ -n ${IS_OUTBOX[$1]:-} ]] || { echo 0; return; }
  curl -sf --max-time 5 "http://$HOST:${TPORT[$1]}/admin/metrics" | awk '$1 == "outbox_enqueued_total" { print $2; found = 1 } END { if (!found) print 0 }'
}

# ---------------------------------------------------------------- CPU accounting
# user+system ticks of every process in process group $1 (all nginx workers,
# haproxy threads, every thread of outbox: /proc/PID/stat sums a process's threads).
group_ticks() {
  cat /proc/[0-9]*/stat 2>/dev/null |
    awk -v g="$1" '{ sub(/^.*\) /, ""); if ($3 == g) t += $12 + $13 } END { print t + 0 }' || true
}
sys_cpu() { awk '/^cpu /{ print $2+$3+$4+$5+$6+$7+$8+$9, $5+$6, $9 }' /proc/stat; }  # total idle+iowait steal

# A load run is measured between cpu_mark (before) and record_row (after): the target's and
# the upstream's CPU ticks, and the machine's idle and steal time.
cpu_mark() {  # target ; sets CPU0
  local pgid=${TPGID[$1]}
  CPU0="$( ((pgid)) && group_ticks "$pgid" || echo 0) $(group_ticks "$UP_PID") $(sys_cpu)"
}

# record_row target method conns rep rps p50_us p99_us requests errors -> one TSV row in RAW
# and a log line; the CPU figures are what was used since cpu_mark, per request.
record_row() {
  local tgt=$1 method=$2 conns=$3 rep=$4 rps=$5 p50=$6 p99=$7 reqs=$8 errs=$9 pgid=${TPGID[$1]}
  local t0 u0 c0 i0 st0 t1 u1 c1 i1 st1 hz
  read -r t0 u0 c0 i0 st0 <<<"$CPU0"
  t1=$( ((pgid)) && group_ticks "$pgid" || echo 0); u1=$(group_ticks "$UP_PID")
  read -r c1 i1 st1 < <(sys_cpu)
  hz=$(getconf CLK_TCK)
  # proxy / upstream CPU microseconds per request; machine idle% and steal% during the run
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$method" "$conns" "$rep" "$tgt" "$rps" "$p50" "$p99" \
    "$errs" \
    "$(awk -v a="$t0" -v b="$t1" -v r="$reqs" -v hz="$hz" 'BEGIN { printf "%.1f", (b - a) * 1e6 / hz / (r > 0 ? r : 1) }')" \
    "$(awk -v a="$u0" -v b="$u1" -v r="$reqs" -v hz="$hz" 'BEGIN { printf "%.1f", (b - a) * 1e6 / hz / (r > 0 ? r : 1) }')" \
    "$(awk -v c0="$c0" -v c1="$c1" -v i0="$i0" -v i1="$i1" 'BEGIN { printf "%.0f", 100 * (i1 - i0) / (c1 - c0) }')" \
    "$(awk -v c0="$c0" -v c1="$c1" -v s0="$st0" -v s1="$st1" 'BEGIN { printf "%.1f", 100 * (s1 - s0) / (c1 - c0) }')" \
    >>"$RAW"
  log "$(printf '%-5s c%-4s rep%s %-*s %10s req/s  p50 %8sus  p99 %9sus  err %s' "$method" "$conns" "$rep" "$TW" "$tgt" "$rps" "$p50" "$p99" "$errs")"
}

# ---------------------------------------------------------------- wrk
to_us() {  # "1.23ms" / "456.78us" / "1.02s" / "2.00m" -> microseconds
  awk -v v="$1" 'BEGIN { n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    f = (u == "us") ? 1 : (u == "ms") ? 1000 : (u == "s") ? 1e6 : (u == "m") ? 6e7 : -1
    if (f < 0) print "NaN"; else printf "%.1f", n * f }'
}

# run_wrk target port method conns rep duration -> appends one TSV row (unless rep=warm)
run_wrk() {
  local tgt=$1 port=$2 method=$3 conns=$4 rep=$5 dur=$6 url script=() out
  if [[ $method == POST ]]; then url="http://$HOST:$port/echo"; script=(-s "$HERE/post-1k.lua")
  else url="http://$HOST:$port/"; fi
  # Every target gets the same header, so a measured difference is the proxy's.
  [[ -n $AUTH_HEADER ]] && script+=(-H "Authorization: $AUTH_HEADER")
  local stored0 stored
  stored0=$(stored_total "$tgt")
  cpu_mark "$tgt"
  out=$(timeout $((dur + 30)) wrk -t"$THREADS" -c"$conns" -d"${dur}s" --timeout 5s --latency "${script[@]}" "$url" 2>&1) \
    || { echo "$out" >&2; die "wrk failed/timed out: $tgt $method c$conns"; }
  echo "$out" >>"$RUNDIR/wrk-raw.txt"
  local rps p50 p99 reqs errs non2xx
  errs=$(awk '/Socket errors/ { gsub(/,/, ""); print $4 + $6 + $8 + $10 }' <<<"$out")
  non2xx=$(awk '/Non-2xx/ { print $NF }' <<<"$out")
  stored=$(( $(stored_total "$tgt") - stored0 ))
  # A figure made of errors, refusals or stored writes is not a forwarding figure: stop.
  if (( ${errs:-0} + ${non2xx:-0} + stored > 0 )); then
    echo "$out" >&2
    die "$tgt $method c$conns ($rep): ${errs:-0} socket errors, ${non2xx:-0} non-2xx answers, $stored requests stored (202) instead of forwarded"
  fi
  [[ $rep == warm ]] && return 0
  rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
  p50=$(to_us "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
  p99=$(to_us "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
  reqs=$(awk '/requests in/ { print $1 }' <<<"$out")
  [[ -n $rps && -n $reqs ]] || { echo "$out" >&2; die "could not parse wrk output"; }
  record_row "$tgt" "$method" "$conns" "$rep" "$rps" "$p50" "$p99" "$reqs" 0
}

# run_matrix runner conns-list warm-up-conns target... : for each method a warm-up (WARMUP s)
# per target, then for each connection count REPS rounds with the targets interleaved
# (A B C A B C ...), so that drift in the machine's speed hits every target alike. The runner
# is called as: runner target port method conns rep-or-warm duration.
T_START=""  # the first load run; MAX_TOTAL_S counts from there (not from the build)
run_matrix() {
  local runner=$1 conns_list=$2 warm_conns=$3 m c r t
  shift 3
  [[ -n $T_START ]] || T_START=$SECONDS
  for m in $METHODS; do
    for t in "$@"; do "$runner" "$t" "${TPORT[$t]}" "$m" "$warm_conns" warm "$WARMUP"; done
    for c in $conns_list; do
      for ((r = 1; r <= REPS; r++)); do
        for t in "$@"; do
          (( SECONDS - T_START + DURATION < MAX_TOTAL_S )) || die "MAX_TOTAL_S=${MAX_TOTAL_S}s reached"
          "$runner" "$t" "${TPORT[$t]}" "$m" "$c" "$r" "$DURATION"
          sleep 0.5
        done
      done
    done
  done
}

# ---------------------------------------------------------------- sanity checks
check_target() {  # name port [hint, added to a failed GET's error]
  local name=$1 port=$2 hint=${3:-} code size res
  res=$(curl -sS -o /dev/null -w '%{http_code} %{size_download}' --max-time 5 "http://$HOST:$port/") \
    || die "$name: GET http://$HOST:$port/ failed"
  read -r code size <<<"$res"
  if [[ $code != 200 || $size != 1024 ]]; then
    tail -5 "$RUNDIR/$name.log" >&2 2>/dev/null || true
    die "$name: GET / gave $code/$size bytes, want 200/1024$hint"
  fi
  code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 -H 'Content-Type: application/json' \
         --data-binary "@$RUNDIR/body1k.json" "http://$HOST:$port/echo") || die "$name: POST /echo failed"
  [[ $code == 201 ]] || die "$name: POST /echo gave $code, want 201"
  # two pipelined POSTs with 1 KiB bodies on one connection: both must get 201,
  # which only happens if the body of the first one was consumed.
  local n
  # shellcheck disable=SC2016  # expanded by the inner bash, from its arguments
  n=$(timeout 10 bash -c '
      exec 3<>"/dev/tcp/$0/$1"
      b=$(cat "$2")
      printf "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1024\r\n\r\n%s" "$b" >&3
      printf "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1024\r\nConnection: close\r\n\r\n%s" "$b" >&3
      cat <&3' "$HOST" "$port" "$RUNDIR/body1k.json" | grep -o 'HTTP/1\.1 201 ' | wc -l || true)
  [[ $n == 2 ]] || die "$name: pipelined POST check got $n x 201, want 2"
}

# ---------------------------------------------------------------- summary
# print_summary "a/b ..." : the table of medians over the reps, one row per method, connection
# count and target, then for each pair a/b (target a measured against target b) a line with
# req/s and p99 ratios and both CPU µs/request, and with a baseline the new/base lines.
print_summary() {
  awk -F'\t' -v order="${ALL_TARGETS[*]}" -v base="$BASELINE" -v pairs="$1" '
function med(key,   n, i, j, a, t) {
  n = cnt[key]; for (i = 1; i <= n; i++) a[i] = v[key, i]
  for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
  return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function add(k, x) { cnt[k]++; v[k, cnt[k]] = x + 0 }
{
  k = $1 SUBSEP $2 SUBSEP $4
  add(k SUBSEP "rps", $5); add(k SUBSEP "p50", $6); add(k SUBSEP "p99", $7)
  add(k SUBSEP "cpu", $9); add(k SUBSEP "up", $10); add(k SUBSEP "idle", $11); add(k SUBSEP "steal", $12)
  err[k] += $8
  if (!(k in lo) || $5 + 0 < lo[k]) lo[k] = $5 + 0
  if (!(k in hi) || $5 + 0 > hi[k]) hi[k] = $5 + 0
  if (!seen[$1 SUBSEP $2]++) { combos[++nc] = $1 SUBSEP $2 }
  rep[k, $3] = $5 + 0; if ($3 + 0 > nr) nr = $3 + 0
}
END {
  nt = split(order, T, " ")
  np = split(pairs, P, " ")
  tw = 9; for (ti = 1; ti <= nt; ti++) if (length(T[ti]) > tw) tw = length(T[ti])
  # with a baseline: two more columns, each target against outbox-base
  bh = base ? sprintf(" %8s %8s", "rps/base", "cpu/base") : ""
  printf "%-5s %5s %-*s %10s %6s %9s %9s %8s %8s %8s%s %8s %8s %6s %6s\n", \
    "meth", "conns", tw, "target", "req/s", "rng%", "p50_ms", "p99_ms", "rps/ngx", "p99/ngx", "rps/dir", bh, "prx_us", "up_us", "idle%", "errs"
  for (ci = 1; ci <= nc; ci++) {
    split(combos[ci], mc, SUBSEP)
    kn = combos[ci] SUBSEP "nginx"; kd = combos[ci] SUBSEP "direct"; kb = combos[ci] SUBSEP "outbox-base"
    rn = (cnt[kn SUBSEP "rps"]) ? med(kn SUBSEP "rps") : 0; pn = (cnt[kn SUBSEP "p99"]) ? med(kn SUBSEP "p99") : 0
    rd = (cnt[kd SUBSEP "rps"]) ? med(kd SUBSEP "rps") : 0
    rb = (cnt[kb SUBSEP "rps"]) ? med(kb SUBSEP "rps") : 0; cb = (cnt[kb SUBSEP "cpu"]) ? med(kb SUBSEP "cpu") : 0
    for (ti = 1; ti <= nt; ti++) {
      k = combos[ci] SUBSEP T[ti]
      if (!cnt[k SUBSEP "rps"]) continue
      r = med(k SUBSEP "rps"); p99 = med(k SUBSEP "p99"); c = med(k SUBSEP "cpu")
      bc = base ? sprintf(" %8s %8s", (rb ? sprintf("%.2f", r / rb) : "-"), \
                  (cb && T[ti] != "direct" ? sprintf("%.2f", c / cb) : "-")) : ""
      printf "%-5s %5s %-*s %10.0f %6.0f %9.3f %9.3f %8s %8s %8s%s %8s %8.1f %6.0f %6d\n", mc[1], mc[2], tw, T[ti], r, \
        (r > 0 ? 100 * (hi[k] - lo[k]) / r : 0), \
        med(k SUBSEP "p50") / 1000, p99 / 1000, \
        (rn ? sprintf("%.2f", r / rn) : "-"), (pn ? sprintf("%.2f", p99 / pn) : "-"), (rd ? sprintf("%.2f", r / rd) : "-"), bc, \
        (T[ti] == "direct" ? "-" : sprintf("%.1f", c)), med(k SUBSEP "up"), med(k SUBSEP "idle"), err[k]
      for (pi = 1; pi <= np; pi++) {
        split(P[pi], ab, "/"); ko = combos[ci] SUBSEP ab[2]
        if (T[ti] != ab[1] || !cnt[ko SUBSEP "rps"]) continue
        ro = med(ko SUBSEP "rps"); po = med(ko SUBSEP "p99"); co = med(ko SUBSEP "cpu")
        vs[++nv] = sprintf("%-5s c%-4s %s: req/s x%.2f, p99 x%.2f, CPU %.1f vs %.1f us/req (x%s)", \
          mc[1], mc[2], P[pi], (ro ? r / ro : 0), (po ? p99 / po : 0), c, co, (co ? sprintf("%.2f", c / co) : "-"))
      }
      if (T[ti] == "outbox" && rb) {
        # Per-rep ratios pair runs made back to back, so their spread shows how much of
        # new/base is noise.
        lo_r = hi_r = ""
        for (i = 1; i <= nr; i++) {
          if (!((k, i) in rep) || !((kb, i) in rep) || !rep[kb, i]) continue
          x = rep[k, i] / rep[kb, i]
          if (lo_r == "" || x < lo_r) lo_r = x
          if (hi_r == "" || x > hi_r) hi_r = x
        }
        bv[++nb] = sprintf("%s c%s: new/base req/s %.2f×, CPU %.1f vs %.1f µs/req (%s×)%s%s", mc[1], mc[2], r / rb, c, cb, \
          (cb ? sprintf("%.2f", c / cb) : "-"), \
          (nr > 1 && lo_r != "" ? sprintf("; req/s per rep %.2f–%.2f×", lo_r, hi_r) : ""), \
          (err[k] + err[kb] ? sprintf("; errors new %d, base %d", err[k], err[kb]) : ""))
      }
    }
  }
  print "# rng%: (max-min)/median of req/s over the reps (run-to-run noise)."
  print "# prx_us/up_us: CPU microseconds per request used by the proxy process group / the upstream (medians)."
  print "# idle%: machine-wide idle during the run (low = CPU-bound, numbers reflect CPU sharing). errs: 0, since a run with socket errors, non-2xx answers or requests stored (202) stops the benchmark with the reason."
  if (base) print "# rps/base, cpu/base: req/s and prx_us relative to outbox-base (the baseline) in the same run."
  if (nv) { print ""; for (i = 1; i <= nv; i++) print vs[i] }
  if (nb) { print ""; for (i = 1; i <= nb; i++) print bv[i] }
}' "$RAW"
}

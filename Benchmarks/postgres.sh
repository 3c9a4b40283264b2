#!/usr/bin/env bash
# The PostgreSQL store (SPEC §9, issue 29) on one private cluster, each figure next to its peer
# of the same run:
#   (a) durable 202s per second on the postgres store: wrk POSTing 1 KiB bodies over 64
#       connections with the upstream down, alternated round by round with pgbench inserting one
#       1 KiB row per transaction at 64 clients into the same cluster (both wait on the same WAL
#       flush; group commit is what lets Outbox beat one row per commit);
#   (b) drain into nginx from the postgres store and from the local store, unkeyed and over 16
#       ordering keys: the same number of queued 1 KiB operations, timed from the first
#       completion to the last (40 000 by default: the local store drains 16 keys at ~25 000/s,
#       and a drain of under a second weighed its start, claims and first looks, as much as
#       its steady rate);
#   (c) a million operations queued in PostgreSQL: a fresh instance's time to its listening
#       line and its RSS, and the durable 202 rate at 1M next to (a)'s at 0.
#
#   Benchmarks/postgres.sh                     # DURATION=10 ROUNDS=2 DRAIN_ROUNDS=2 DRAIN_OPS=40000 OPS_1M=1000000
#   DURATION=5 ROUNDS=2 OPS_1M=0 Benchmarks/postgres.sh
#   OUTBOX_BIN=/path/to/outbox Benchmarks/postgres.sh   # a given binary, no build
#   SKIP_DRAIN=1 Benchmarks/postgres.sh                  # (a) and (c) only
#   PG_STATEMENTS=1 Benchmarks/postgres.sh               # also the statements that took the
#                                                        # server's time in each postgres arm
#                                                        # (pg_stat_statements; slows the server)
#
# The cluster: initdb into a temp dir (as the postgres user when run as root), 127.0.0.1 on a
# free port, fsync on, Debian's defaults otherwise; stopped and removed on exit, as is every
# process started here. Loopback only.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-64}
DRAIN_OPS=${DRAIN_OPS:-40000}
OPS_1M=${OPS_1M:-1000000}
SKIP_DRAIN=${SKIP_DRAIN:-0}
DRAIN_ROUNDS=${DRAIN_ROUNDS:-2}
PG_STATEMENTS=${PG_STATEMENTS:-0}
BASE_PORT=${BASE_PORT:-19200}
UP_PORT=$BASE_PORT OBX_PORT=$((BASE_PORT + 1)) PG_PORT=$((BASE_PORT + 2)) DOWN_PORT=$((BASE_PORT + 3))
RUN=$(mktemp -d /tmp/pgbench-outbox.XXXXXX)
PIDS=()
PG_PID=""

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -n $PG_PID ]]; then
    kill -INT "$PG_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$PG_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$PG_PID" 2>/dev/null || true
  fi
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -x $PGBIN/initdb && -x $PGBIN/pgbench ]] || die "needs PostgreSQL's server and pgbench (apt-get install postgresql)"
for tool in wrk nginx curl python3; do command -v "$tool" >/dev/null || die "needs $tool (apt-get install wrk nginx curl)"; done
for port in $UP_PORT $OBX_PORT $PG_PORT $DOWN_PORT; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then die "port $port is in use"; fi
done

if [[ -n ${OUTBOX_BIN:-} ]]; then
  BIN=$OUTBOX_BIN
else
  log "building outbox (release)"
  (cd "$ROOT" && swift build -c release --product outbox >/dev/null)
  BIN=$(cd "$ROOT" && swift build -c release --show-bin-path)/outbox
fi

# ---------------------------------------------------------------- the cluster
as_postgres=()
PRELOAD=""
((PG_STATEMENTS)) && PRELOAD=pg_stat_statements
if [[ $(id -u) == 0 ]]; then
  chown postgres "$RUN"
  as_postgres=(setpriv --reuid=postgres --regid=postgres --init-groups --)
fi
"${as_postgres[@]}" "$PGBIN/initdb" -D "$RUN/pg" -U outbox --auth=trust -E UTF8 --no-instructions --no-sync >"$RUN/initdb.log" 2>&1 ||
  { cat "$RUN/initdb.log" >&2; die "initdb failed"; }
"${as_postgres[@]}" "$PGBIN/postgres" -D "$RUN/pg" -p "$PG_PORT" -c listen_addresses=127.0.0.1 -c unix_socket_directories="$RUN" \
  -c fsync=on -c max_connections=300 ${PRELOAD:+-c shared_preload_libraries=$PRELOAD} >"$RUN/pg.log" 2>&1 &
PG_PID=$!
for _ in $(seq 1 300); do grep -q "ready to accept connections" "$RUN/pg.log" && break; sleep 0.1; done
grep -q "ready to accept connections" "$RUN/pg.log" || { tail "$RUN/pg.log" >&2; die "postgres did not start"; }
PSQL=(psql -h 127.0.0.1 -p "$PG_PORT" -U outbox -d postgres -qAt)
URL="host=127.0.0.1 port=$PG_PORT user=outbox dbname=postgres"
((PG_STATEMENTS)) && "${PSQL[@]}" -c "CREATE EXTENSION pg_stat_statements"
# The statements that took the server's time since the last call (PG_STATEMENTS=1), to stderr.
top_statements() {
  ((PG_STATEMENTS)) || return 0
  log "$1: the server's time by statement"
  # Statements of one shape whose texts differ (a multi-row VALUES of each size) count as one.
  "${PSQL[@]}" -F $'\t' -c "SELECT round(sum(total_exec_time)::numeric, 0) AS ms, sum(calls), sum(rows), shape
    FROM (SELECT *, left(regexp_replace(query, '\s+', ' ', 'g'), 100) AS shape FROM pg_stat_statements) s
    GROUP BY shape ORDER BY 1 DESC LIMIT 10" >&2
  "${PSQL[@]}" -c "SELECT pg_stat_statements_reset()" >/dev/null
}
"${PSQL[@]}" -c "CREATE TABLE pgbench_rows (id bigserial PRIMARY KEY, body text NOT NULL)"
printf "INSERT INTO pgbench_rows (body) VALUES (repeat('a', 1024));\n" >"$RUN/insert-1k.sql"
chmod 0644 "$RUN/insert-1k.sql"

BODY=$(printf 'x%.0s' $(seq 1 1014))
sed -e "s#@RUNDIR@#$RUN#g" -e "s#@UP_PORT@#$UP_PORT#g" -e "s#@BODY1K@#$BODY#" "$HERE/upstream.conf" >"$RUN/upstream.conf"
mkdir -p "$RUN/upstream-body"

# ---------------------------------------------------------------- helpers
OBX_PID=""
start_outbox() {  # store (local|postgres) schema upstream-port keys-config; sets OBX_PID, STARTED
  local store=$1 schema=$2 upstream=$3 t0
  # maxOperations above (c)'s million, so that its 202s are not refused as a full queue.
  printf '{"queue": {"store": "%s", "maxOperations": 10000000, "postgres": {"url": "%s", "schema": "%s"}}, "reachability": {"probeIntervalSeconds": 0.2},
    "retry": {"preset": "immediate"}}\n' "$store" "$URL" "$schema" >"$RUN/config-$schema.json"
  : >"$RUN/outbox.err"
  t0=$EPOCHREALTIME
  "$BIN" --config "$RUN/config-$schema.json" --listen "127.0.0.1:$OBX_PORT" --upstream "http://127.0.0.1:$upstream" \
    --data-dir "$RUN/data-$schema" --log-level warn >"$RUN/outbox.out" 2>"$RUN/outbox.err" &
  OBX_PID=$!
  PIDS+=("$OBX_PID")
  for _ in $(seq 1 6000); do
    grep -q "outbox listening on" "$RUN/outbox.err" 2>/dev/null && break
    kill -0 "$OBX_PID" 2>/dev/null || { cat "$RUN/outbox.err" >&2; die "outbox exited"; }
    sleep 0.005
  done
  STARTED=$(python3 -c "print(f'{$EPOCHREALTIME - $t0:.2f}')")
}
stop_outbox() { kill -TERM "$OBX_PID" 2>/dev/null || true; wait "$OBX_PID" 2>/dev/null || true; }
# CPU seconds spent so far: `cpu_seconds pid` for one process, `cpu_seconds cluster` for the
# PostgreSQL cluster (the postmaster, its live children and those it has reaped: backends of
# connections that closed), `cpu_seconds machine` for every core's busy time.
cpu_seconds() {
  python3 - "$1" "$PG_PID" <<'PY'
import os, sys
hz = os.sysconf("SC_CLK_TCK")
def fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()
def own(pid, reaped=False):
    try:
        f = fields(pid)
    except OSError:
        return 0
    return int(f[11]) + int(f[12]) + ((int(f[13]) + int(f[14])) if reaped else 0)
what, pg = sys.argv[1], sys.argv[2]
if what == "machine":
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    ticks = sum(cpu) - cpu[3] - cpu[4]
elif what == "cluster":
    ticks = own(pg, reaped=True)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if fields(pid)[1] == pg: ticks += own(pid)
            except OSError:
                pass
else:
    ticks = own(what)
print(ticks / hz)
PY
}
per_op() { python3 -c "print(f'{($2 - $1) / max($3, 1) * 1e6:.0f}')"; }  # before after count -> µs each
rss_mb() { awk -v k="$2" '$1 == k":" {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
post_202s() {  # seconds script -> sets RPS; fails on any answer other than 202
  wrk -t2 -c"$CONNS" -d"$1s" --latency -s "$2" "http://127.0.0.1:$OBX_PORT/echo" >"$RUN/wrk.txt"
  RPS=$(awk '/Requests\/sec/ {printf "%.0f", $2}' "$RUN/wrk.txt")
  if grep -q "Non-2xx" "$RUN/wrk.txt"; then cat "$RUN/wrk.txt" >&2; tail -5 "$RUN/outbox.err" >&2; die "answers other than 202"; fi
  if grep -q "Socket errors" "$RUN/wrk.txt"; then cat "$RUN/wrk.txt" >&2; die "socket errors"; fi
}

# Each measured arm starts from a cluster at rest: the schemas and rows of earlier arms dropped
# (else autovacuum cleans them up during a later arm, whose CPU it then counts) and a CHECKPOINT
# (else one falls due, by WAL volume or time, in the middle of an arm). A drain arm settles
# before its queue is filled, so the drain itself runs as it would between two checkpoints.
settle() {
  local stale
  stale=$("${PSQL[@]}" -c "SELECT string_agg(quote_ident(nspname), ', ') FROM pg_namespace WHERE nspname LIKE 'bench\_%'")
  [[ -n $stale ]] && PGOPTIONS="-c client_min_messages=warning" "${PSQL[@]}" -c "DROP SCHEMA $stale CASCADE" >/dev/null
  "${PSQL[@]}" -c "TRUNCATE pgbench_rows" -c "CHECKPOINT"
}

# ---------------------------------------------------------------- (a) durable 202s vs pgbench
declare -a LINES=() CPU_LINES=()
ZERO_RPS=0
for round in $(seq 1 "$ROUNDS"); do
  log "(a) round $round: outbox on the postgres store, wrk -c$CONNS -d${DURATION}s POST 1 KiB, upstream down"
  settle
  start_outbox postgres "bench_a$round" "$DOWN_PORT"
  PG0=$(cpu_seconds cluster) OBX0=$(cpu_seconds "$OBX_PID") ALL0=$(cpu_seconds machine)
  post_202s "$DURATION" "$HERE/post-1k.lua"
  OBX1=$(cpu_seconds "$OBX_PID") ALL1=$(cpu_seconds machine)
  OUT=$RPS
  P99=$(awk '$1 == "99%" {print $2}' "$RUN/wrk.txt")
  PER_COMMIT=$(curl -s "http://127.0.0.1:$OBX_PORT/admin/metrics" |
    awk '/^outbox_store_operations_per_commit_sum/ {s=$2} /^outbox_store_operations_per_commit_count/ {c=$2} END {if (c > 0) printf "%.1f", s / c}')
  stop_outbox
  PG1=$(cpu_seconds cluster)
  N=$(awk '/requests in/ {print $1}' "$RUN/wrk.txt")
  OUT_CPU="outbox $(per_op "$OBX0" "$OBX1" "$N") µs + postgres $(per_op "$PG0" "$PG1" "$N") µs of CPU per 202, all cores $(per_op "$ALL0" "$ALL1" "$N") µs"
  ((round == 1)) && ZERO_RPS=$OUT
  log "(a) round $round: pgbench -c64 -j2 -T$DURATION, one 1 KiB row per transaction"
  settle
  PG0=$(cpu_seconds cluster) ALL0=$(cpu_seconds machine)
  "$PGBIN/pgbench" -n -c 64 -j 2 -T "$DURATION" -f "$RUN/insert-1k.sql" -h 127.0.0.1 -p "$PG_PORT" -U outbox postgres >"$RUN/pgbench.txt" 2>&1 ||
    { cat "$RUN/pgbench.txt" >&2; die "pgbench failed"; }
  TPS=$(awk '/^tps = / {printf "%.0f", $3}' "$RUN/pgbench.txt")
  PG1=$(cpu_seconds cluster) ALL1=$(cpu_seconds machine)
  N=$(awk '/number of transactions actually processed/ {print $NF}' "$RUN/pgbench.txt")
  PGB_CPU="postgres $(per_op "$PG0" "$PG1" "$N") µs of CPU per row, all cores $(per_op "$ALL0" "$ALL1" "$N") µs"
  log "(a) round $round: $OUT_CPU; pgbench: $PGB_CPU"
  CPU_LINES+=("| $round | $OUT_CPU | $PGB_CPU |")
  LINES+=("$(printf '| %d | %s 202/s, p99 %s, %s writes per commit | %s rows/s | %.2f× |' "$round" "$OUT" "$P99" "$PER_COMMIT" "$TPS" \
    "$(python3 -c "print($OUT / max($TPS, 1))")")")
  log "${LINES[-1]}"
done

# ---------------------------------------------------------------- (b) drain, postgres vs local
declare -a DRAIN=() DRAIN_CPU=()
if ((SKIP_DRAIN == 0)); then
  source "$HERE/status-poll.sh"
  drain_arm() {  # store keys -> prints operations/s
    # A schema (and data directory) of its own per round: each round drains a queue without history.
    local store=$1 keys=$2 schema="bench_d${1}${2}r${drain_round}" script="$HERE/post-1k.lua" T0 DONE0 NGINX
    ((keys > 0)) && script="$HERE/post-1k-keyed.lua"
    export KEYS=$keys
    settle
    start_outbox "$store" "$schema" "$UP_PORT"
    # Queue DRAIN_OPS with the upstream down: wrk in short bursts until the count is reached.
    while true; do
      local queued
      queued=$(curl -s "http://127.0.0.1:$OBX_PORT/admin/status" | python3 -c "import json,sys; print(json.load(sys.stdin)['counts']['pending'])")
      ((queued >= DRAIN_OPS)) && break
      wrk -t2 -c"$CONNS" -d1s -s "$script" "http://127.0.0.1:$OBX_PORT/echo" >/dev/null
    done
    status_open "$OBX_PORT" "$OBX_PID"
    if ((PG_STATEMENTS)); then "${PSQL[@]}" -c "SELECT pg_stat_statements_reset()" >/dev/null; fi
    nginx -p "$RUN" -e "$RUN/upstream.err" -c "$RUN/upstream.conf" &
    NGINX=$!
    PIDS+=("$NGINX")
    T0='' DONE0=0
    local obx0 pg0 all0
    for _ in $(seq 1 600000); do
      status_poll
      if [[ -z $T0 ]] && ((DONE > 0)); then
        T0=$AT DONE0=$DONE
        obx0=$(cpu_seconds "$OBX_PID") pg0=$(cpu_seconds cluster) all0=$(cpu_seconds machine)
      fi
      [[ -n $T0 ]] && ((BUSY == 0)) && break
      status_nap
    done
    local n=$((DONE - DONE0))
    local cpu="outbox $(per_op "$obx0" "$(cpu_seconds "$OBX_PID")" "$n") µs, postgres $(per_op "$pg0" "$(cpu_seconds cluster)" "$n") µs, all cores $(per_op "$all0" "$(cpu_seconds machine)" "$n") µs"
    status_close
    kill -TERM "$NGINX"; wait "$NGINX" 2>/dev/null || true
    stop_outbox
    if [[ $store == postgres ]]; then top_statements "(b) $keys keys"; fi
    awk -v n="$n" -v t0="$T0" -v t1="$AT" 'BEGIN { printf "%.0f", (t1 > t0 ? n / (t1 - t0) : 0) }'
    echo " $cpu"
  }
  for drain_round in $(seq 1 "$DRAIN_ROUNDS"); do
  for keys in 0 16; do
    log "(b) round $drain_round: drain of $DRAIN_OPS operations into nginx, $keys ordering keys: local store"
    read -r LOCAL LOCAL_CPU <<<"$(drain_arm local "$keys")"
    log "(b) round $drain_round: drain of $DRAIN_OPS operations into nginx, $keys ordering keys: postgres store"
    read -r PG PG_CPU <<<"$(drain_arm postgres "$keys")"
    DRAIN_CPU+=("| $drain_round | $keys | $PG_CPU | $LOCAL_CPU |")
    DRAIN+=("$(printf '| %d | %s | %s ops/s | %s ops/s | %.2f× |' "$drain_round" "$([[ $keys == 0 ]] && echo "no keys (one lane)" || echo "$keys keys")" \
      "$PG" "$LOCAL" "$(python3 -c "print($PG / max($LOCAL, 1))")")")
    log "${DRAIN[-1]}"
  done
  done
fi

# ---------------------------------------------------------------- (c) a million queued
if ((OPS_1M > 0)); then
  log "(c) $OPS_1M operations into the postgres store (by SQL, through an instance's schema)"
  settle
  start_outbox postgres bench_c "$DOWN_PORT"
  stop_outbox
  "${PSQL[@]}" <<SQL
SET search_path TO bench_c;
INSERT INTO lanes (origin, lane, unfinished) VALUES ('http://127.0.0.1:$DOWN_PORT', '', $OPS_1M);
WITH added AS (
    INSERT INTO requests (id, origin, lane, idempotency_key, fingerprint, credentials, method, target, headers, body,
                          priority, created_at)
    SELECT gen_random_uuid(), 'http://127.0.0.1:$DOWN_PORT', '', 'fill-' || n, '\\x00', '\\x', 'POST', '/echo',
           '[["Host","127.0.0.1:$DOWN_PORT"],["Content-Type","application/json"]]', convert_to(repeat('x', 1024), 'UTF8'), 1,
           (extract(epoch from now()) * 1000)::bigint
      FROM generate_series(1, $OPS_1M) n
    RETURNING seq, origin, lane)
INSERT INTO states (seq, origin, lane, status, lane_rank) SELECT seq, origin, lane, 'pending', 1 FROM added;
SQL
  # The queue at rest, as a deployment finds it: not in the checkpoint and vacuum that a million
  # rows written by one statement set off.
  "${PSQL[@]}" -c "VACUUM ANALYZE bench_c.requests" -c "VACUUM ANALYZE bench_c.states" -c "CHECKPOINT"
  start_outbox postgres bench_c "$DOWN_PORT"
  LISTEN_1M=$STARTED
  RSS_START=$(rss_mb "$OBX_PID" VmRSS)
  post_202s "$DURATION" "$HERE/post-1k.lua"
  RPS_1M=$RPS
  HWM_1M=$(rss_mb "$OBX_PID" VmHWM)
  stop_outbox
fi

# ---------------------------------------------------------------- report
echo
echo "## (a) durable 202/s on the postgres store vs pgbench, one cluster, arms alternated (${DURATION} s each)"
echo "| round | outbox, postgres store | pgbench, 64 clients | ratio |"
echo "| --- | --- | --- | --- |"
printf '%s\n' "${LINES[@]}"
echo
echo "| round | CPU, outbox arm | CPU, pgbench arm |"
echo "| --- | --- | --- |"
printf '%s\n' "${CPU_LINES[@]}"
if ((${#DRAIN[@]})); then
  echo
  echo "## (b) drain of $DRAIN_OPS operations into nginx"
  echo "| round | lanes | postgres store | local store | ratio |"
  echo "| --- | --- | --- | --- | --- |"
  printf '%s\n' "${DRAIN[@]}"
  echo
  echo "| round | keys | CPU per operation, postgres store | CPU per operation, local store |"
  echo "| --- | --- | --- | --- |"
  printf '%s\n' "${DRAIN_CPU[@]}"
fi
if ((OPS_1M > 0)); then
  echo
  echo "## (c) $OPS_1M operations queued in PostgreSQL"
  echo "listening after ${LISTEN_1M} s, RSS ${RSS_START} MB (peak ${HWM_1M} MB under load); durable 202/s at 1M: $RPS_1M, at 0: $ZERO_RPS ($(python3 -c "print(f'{($RPS_1M - $ZERO_RPS) / max($ZERO_RPS, 1) * 100:+.1f}')") %)"
fi

#!/usr/bin/env bash
# What an /admin/events listener costs forwarding: wrk GET and POST 1 KiB through Outbox into
# a local nginx, with writes being queued for a down origin in the background (RATE per second,
# each announced as events), once without and once with a listener on /admin/events, the two
# interleaved (their order swapped every repetition), median of REPS. Prints req/s and Outbox's
# CPU µs per forwarded request per arm, the listener's events/s, and the with/without ratios.
#
#   Benchmarks/events.sh                          # build outbox (release), ~3 min
#   OUTBOX_BIN=/path/to/outbox Benchmarks/events.sh
#
# Knobs (env): DURATION=10  REPS=3  CONNS=64  RATE=1000 (queued writes/s, one event each)
#   BASE_PORT=19300 (upstream; outbox +1)
# Loopback only; every process started here is stopped on exit; data lives in a temp dir.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DURATION=${DURATION:-10}
REPS=${REPS:-3}
CONNS=${CONNS:-64}
RATE=${RATE:-1000}
BASE_PORT=${BASE_PORT:-19300}
UP_PORT=$BASE_PORT OBX_PORT=$((BASE_PORT + 1))
RUN=$(mktemp -d /tmp/eventsbench.XXXXXX)
PIDS=()

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.3
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for tool in wrk nginx curl python3; do command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 1; }; done
for port in $UP_PORT $OBX_PORT; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "port $port is in use" >&2; exit 1; fi
done
if [[ -n ${OUTBOX_BIN:-} ]]; then
  BIN=$OUTBOX_BIN
else
  log "building outbox (release)"
  (cd "$ROOT" && swift build -c release --product outbox >/dev/null)
  BIN=$(cd "$ROOT" && swift build -c release --show-bin-path)/outbox
fi

BODY=$(printf 'x%.0s' $(seq 1 1014))
sed -e "s#@RUNDIR@#$RUN#g" -e "s#@UP_PORT@#$UP_PORT#g" -e "s#@BODY1K@#$BODY#" "$HERE/upstream.conf" >"$RUN/upstream.conf"
mkdir -p "$RUN/upstream-body"
nginx -p "$RUN" -e "$RUN/upstream.err" -c "$RUN/upstream.conf" &
PIDS+=($!)
"$BIN" --listen "127.0.0.1:$OBX_PORT" --upstream "http://127.0.0.1:$UP_PORT" --data-dir "$RUN/data" \
  --log-level warn 2>"$RUN/outbox.err" &
OBX_PID=$!
PIDS+=("$OBX_PID")
for _ in $(seq 300); do grep -q "outbox listening on" "$RUN/outbox.err" && break; sleep 0.1; done
grep -q "outbox listening on" "$RUN/outbox.err" || { cat "$RUN/outbox.err" >&2; exit 1; }
curl -fsS "http://127.0.0.1:$OBX_PORT/echo" >/dev/null

ticks() { awk '{print $14 + $15}' "/proc/$OBX_PID/stat"; }
HZ=$(getconf CLK_TCK)

echo "arm method rep req_s cpu_us events_s" >"$RUN/results"
for ((rep = 1; rep <= REPS; rep++)); do
  # The arms swap places every repetition, so a drift of the machine over a repetition (or the
  # queue growing) does not always favour the same arm.
  arms=(without with)
  ((rep % 2 == 0)) && arms=(with without)
  for arm in "${arms[@]}"; do
    for method in GET POST; do
      script=()
      [[ $method == POST ]] && script=(-s "$HERE/post-1k.lua")
      python3 "$HERE/events-client.py" generate "$OBX_PORT" "$RATE" "$((DURATION + 2))" >/dev/null &
      GEN=$!
      PIDS+=("$GEN")
      events=0
      if [[ $arm == with ]]; then
        # curl, not Python: the listener's own CPU must not be what the comparison measures.
        curl -sN --max-time "$((DURATION + 1))" -H 'Accept: text/event-stream' \
          "http://127.0.0.1:$OBX_PORT/admin/events" -o "$RUN/listener.out" &
        LISTENER=$!
        PIDS+=("$LISTENER")
      fi
      sleep 1
      t0=$(ticks)
      wrk -t2 -c"$CONNS" -d"${DURATION}s" "${script[@]}" "http://127.0.0.1:$OBX_PORT/echo" >"$RUN/wrk.txt"
      t1=$(ticks)
      wait "$GEN" || true
      if [[ $arm == with ]]; then
        wait "$LISTENER" || true
        events=$(python3 -c "print(f'{$(grep -c '^event:' "$RUN/listener.out") / ($DURATION + 1):.0f}')")
      fi
      rps=$(awk '/Requests\/sec/ {print $2}' "$RUN/wrk.txt")
      total=$(awk '/requests in/ {print $1}' "$RUN/wrk.txt")
      cpu=$(python3 -c "print(f'{($t1 - $t0) / $HZ * 1e6 / $total:.1f}')")
      log "rep $rep $arm listener $method: $rps req/s, $cpu µs/req, listener $events events/s"
      echo "$arm $method $rep $rps $cpu $events" >>"$RUN/results"
    done
  done
done

python3 - "$RUN/results" "$RATE" "$REPS" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]).read().splitlines()[1:]]
print(f"\n# events listener cost: wrk -c64, background queued writes {sys.argv[2]}/s, median of {sys.argv[3]}")
print("method  arm       req/s    CPU us/req  listener events/s")
for method in ("GET", "POST"):
    med = {}
    for arm in ("without", "with"):
        sel = [r for r in rows if r[0] == arm and r[1] == method]
        med[arm] = (statistics.median(float(r[3]) for r in sel), statistics.median(float(r[4]) for r in sel),
                    statistics.median(float(r[5]) for r in sel))
        print(f"{method:6}  {arm:8}  {med[arm][0]:8.0f}  {med[arm][1]:10.1f}  {med[arm][2]:10.0f}")
    print(f"{method}: with/without req/s {med['with'][0] / med['without'][0]:.2f}x, CPU {med['with'][1] / med['without'][1]:.2f}x")
PY

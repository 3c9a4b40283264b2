#!/usr/bin/env bash
# Runs the whole test suite N times on the current tree while two CPU burners load the
# machine, as CI's small shared machines are loaded, and prints `N passed, M failed`.
#
#   Tests/Scripts/soak.sh 10          # ten runs under load
#   BURNERS=0 Tests/Scripts/soak.sh 3 # quiet machine, for comparison
#
# The burners are `stress-ng --cpu 2` (installed with apt-get when missing and run as root;
# without it, two shell busy loops stand in). The suite is built once (`swift build
# --build-tests`), then each run is `swift test --skip-build`, bounded by RUN_TIMEOUT seconds.
# A failing run's log is kept in the directory printed at the end; passing runs' logs are
# removed. Every process the script starts is stopped on exit, Ctrl-C or error.
#
# Knobs (env): BURNERS (2) RUN_TIMEOUT (900) INSTALL (1: may call apt-get) KEEP_LOGS (0)
set -euo pipefail

N=${1:-10}
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "soak.sh: expected a run count (a positive integer), got '$N'" >&2; exit 2; }
BURNERS=${BURNERS:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
INSTALL=${INSTALL:-1}
KEEP_LOGS=${KEEP_LOGS:-0}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
command -v swift >/dev/null || export PATH=/opt/swift/usr/bin:$PATH
LOGS=$(mktemp -d /tmp/outbox-soak.XXXXXX)
declare -a BURNER_PIDS=()

log() { printf '[soak %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

stop_burners() {
  local p
  for p in "${BURNER_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${BURNER_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  BURNER_PIDS=()
}
trap 'stop_burners' EXIT
trap 'exit 130' INT TERM

start_burners() {
  ((BURNERS > 0)) || return 0
  if ! command -v stress-ng >/dev/null && [[ $INSTALL == 1 && $(id -u) == 0 ]]; then
    log "installing stress-ng"
    { timeout 300 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 300 \
        apt-get install -y -qq --no-install-recommends stress-ng; } >"$LOGS/apt.log" 2>&1 ||
      log "apt-get install stress-ng failed (see $LOGS/apt.log); using shell busy loops"
  fi
  if command -v stress-ng >/dev/null; then
    # --timeout bounds it even if this script is killed with SIGKILL.
    stress-ng --cpu "$BURNERS" --timeout 6h --quiet &
    BURNER_PIDS+=($!)
    log "load: stress-ng --cpu $BURNERS (pid ${BURNER_PIDS[*]})"
  else
    local i
    for ((i = 0; i < BURNERS; i++)); do
      timeout 6h bash -c 'while :; do :; done' &
      BURNER_PIDS+=($!)
    done
    log "load: $BURNERS shell busy loops (pids ${BURNER_PIDS[*]})"
  fi
}

log "building the tests once"
swift build --build-tests >"$LOGS/build.log" 2>&1 || { tail -40 "$LOGS/build.log" >&2; log "build failed"; exit 1; }

start_burners
passed=0 failed=0
declare -a times=()
for ((run = 1; run <= N; run++)); do
  t0=$(date +%s%N)
  rc=0
  timeout --kill-after=15 "$RUN_TIMEOUT" swift test --skip-build >"$LOGS/run-$run.log" 2>&1 </dev/null || rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  seconds="$((ms / 1000)).$((ms % 1000 / 100))"
  times+=("$seconds")
  closing=$(grep -Eo 'Test run with .*' "$LOGS/run-$run.log" | tail -1 || true)
  if ((rc == 0)); then
    passed=$((passed + 1))
    log "run $run/$N: passed in ${seconds}s  ${closing}"
    [[ $KEEP_LOGS == 1 ]] || rm -f "$LOGS/run-$run.log"
  else
    failed=$((failed + 1))
    log "run $run/$N: FAILED (exit $rc) in ${seconds}s  ${closing}; log: $LOGS/run-$run.log"
    grep -E '✘ Test .* (recorded an issue|failed)' "$LOGS/run-$run.log" | head -10 >&2 || true
  fi
done
stop_burners

log "wall time per run (s): ${times[*]}"
((failed == 0)) && [[ $KEEP_LOGS != 1 ]] && rm -rf "$LOGS" || log "logs kept in $LOGS"
echo "$passed passed, $failed failed"
((failed == 0))

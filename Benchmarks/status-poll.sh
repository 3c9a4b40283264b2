# Polls Outbox's /admin/status on one keep-alive connection from this shell: a process
# started per poll (curl, python) would compete with the replayer for the CPUs it is measured
# on. Sourced, not run, by queue.sh and drain-log.sh.
#
#   status_open PORT PID     # connects; PID is Outbox's, for its CPU ticks
#   status_poll              # sets BUSY (pending + inProgress), DONE (completed),
#                            # AT (epoch seconds) and TICKS (Outbox's utime+stime)
#   status_nap               # 10 ms, without starting a process
#   status_close

status_open() {
  STATUS_PORT=$1 STATUS_PID=$2
  exec {STATUS_FD}<>"/dev/tcp/127.0.0.1/$STATUS_PORT"
  exec {STATUS_NAP}<> <(:)
}

status_poll() {
  local line length=0 body stat
  BUSY=1 DONE=0
  printf 'GET /admin/status HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n' "$STATUS_PORT" >&"$STATUS_FD"
  while IFS= read -r -t 30 line <&"$STATUS_FD"; do
    line=${line%$'\r'}
    [[ -z $line ]] && break
    [[ ${line,,} =~ ^content-length:\ *([0-9]+) ]] && length=${BASH_REMATCH[1]}
  done
  LC_ALL=C read -r -t 30 -N "$length" body <&"$STATUS_FD" || true
  AT=$EPOCHREALTIME
  read -r -a stat <"/proc/$STATUS_PID/stat"
  TICKS=$((stat[13] + stat[14]))
  [[ $body =~ \"pending\":\ *([0-9]+) ]] && BUSY=${BASH_REMATCH[1]}
  [[ $body =~ \"inProgress\":\ *([0-9]+) ]] && BUSY=$((BUSY + BASH_REMATCH[1]))
  [[ $body =~ \"completed\":\ *([0-9]+) ]] && DONE=${BASH_REMATCH[1]}
  return 0
}

status_nap() { read -r -t 0.01 -u "$STATUS_NAP" || true; }

status_close() { exec {STATUS_FD}>&- {STATUS_NAP}>&-; }

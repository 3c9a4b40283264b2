#!/usr/bin/env bash
# https-upstream benchmark on loopback: wrk (plain HTTP) -> proxy -> nginx origin over TLS.
# nginx (proxy_pass https, upstream keepalive, TLS session reuse) vs outbox
# (--upstream https://..., the origin's CA given as tls.caFile), GET 1 KiB and POST 1 KiB,
# targets interleaved, medians of REPS, CPU µs/request of each proxy's process group.
# Interception: the targets tunnel and intercept send HTTPS requests through outbox as an
# HTTPS_PROXY (CONNECT), one kept-alive tunnel per client process (tunnel-client.py): tunnel
# relays the TLS bytes to the origin, intercept terminates TLS in outbox (tls.intercept.hosts)
# and forwards to the origin over a TLS connection of its own.
#
#   Benchmarks/tls-upstream.sh                              # build outbox (release), ~3 min
#   DURATION=2 REPS=1 Benchmarks/tls-upstream.sh            # smoke test, ~30 s
#   OUTBOX_BIN=/path/to/outbox Benchmarks/tls-upstream.sh   # skip the build
#   BASELINE_REV=main Benchmarks/tls-upstream.sh            # this tree's outbox vs main's
#   TARGETS="tunnel intercept" Benchmarks/tls-upstream.sh   # the cost of interception
#
# Knobs (env): DURATION=10 (s per load run)  REPS=3  CONNS="64" (wrk connections)
#   METHODS="GET POST"  THREADS=2 (wrk -t)  WORKERS=2 (nginx-proxy workers)
#   NGX_KEEPALIVE=32 (nginx upstream keepalive per worker)  WARMUP=2 (s, per target and
#   method)  TARGETS="nginx outbox" (also outbox-base, tunnel, intercept)
#   TUNNEL_CLIENTS="4" (client processes = tunnels, for tunnel and intercept; a list)
#   OUTBOX_BIN  OUTBOX_ARGS  OUTBOX_BASELINE_BIN  BASELINE_REV (as in forward.sh)
#   ORIGIN_CA_CERT + ORIGIN_CA_KEY (sign the origin's certificate with this CA instead of a
#   fresh one, e.g. one the system store already trusts, for builds that read only the
#   system store)  START_TIMEOUT=30  MAX_TOTAL_S  RESULTS=<file>  KEEP_RUNDIR=1  INSTALL=0
#   BASE_PORT=19400 (origin; nginx +1, outbox +3, outbox-base +4, tunnel +5, intercept +6)
# Everything listens on 127.0.0.1 only; everything started here is stopped by pid /
# own process-group id on exit, Ctrl-C or error. Certificates are made in the run dir.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BENCH=tlsbench
HOST=127.0.0.1
BASE_PORT=${BASE_PORT:-19400}
UP_PORT=$BASE_PORT NGX_PORT=$((BASE_PORT + 1)) OBX_PORT=$((BASE_PORT + 3)) OBX_BASE_PORT=$((BASE_PORT + 4))
TUN_PORT=$((BASE_PORT + 5)) ICP_PORT=$((BASE_PORT + 6))
TARGETS=${TARGETS:-"nginx outbox"}
VALID_TARGETS="nginx outbox outbox-base tunnel intercept"
TUNNEL_CLIENTS=${TUNNEL_CLIENTS:-"4"}
ORIGIN_CA_CERT=${ORIGIN_CA_CERT:-}
ORIGIN_CA_KEY=${ORIGIN_CA_KEY:-}
# shellcheck source=common.sh
source "$HERE/common.sh"

if [[ -n $ORIGIN_CA_CERT || -n $ORIGIN_CA_KEY ]]; then
  [[ -r $ORIGIN_CA_CERT && -r $ORIGIN_CA_KEY ]] \
    || die "ORIGIN_CA_CERT and ORIGIN_CA_KEY name a readable CA certificate and its key together (got '$ORIGIN_CA_CERT', '$ORIGIN_CA_KEY')"
fi
for c in $TUNNEL_CLIENTS; do
  [[ $c =~ ^[1-9][0-9]*$ ]] || die "TUNNEL_CLIENTS: expected client counts of at least 1, got '$c'"
done
# wrk measures the reverse-proxy targets; the CONNECT targets need a client that tunnels.
WRK_TARGETS=() TUNNEL_TARGETS=()
for t in "${ALL_TARGETS[@]}"; do
  case $t in tunnel | intercept) TUNNEL_TARGETS+=("$t") ;; *) WRK_TARGETS+=("$t") ;; esac
done

# ---------------------------------------------------------------- certificates
# An EC P-256 CA that can vouch only for 127.0.0.1 and localhost (critical nameConstraints: a
# name form without a permitted subtree would be unconstrained, hence the DNS entry), so
# nothing made here could impersonate another host even if its key leaked from /tmp.
make_ca() {  # file-stem common-name
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$2" \
    -keyout "$RUNDIR/$1.key" -out "$RUNDIR/$1.pem" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "nameConstraints=critical,permitted;IP:127.0.0.1/255.255.255.255,permitted;DNS:localhost,excluded;DNS:.localhost" 2>"$RUNDIR/openssl.log" \
    || { cat "$RUNDIR/openssl.log" >&2; die "openssl could not make the CA $1"; }
  chmod 600 "$RUNDIR/$1.key"
}
make_certificates() {  # sets ORIGIN_CA (the CA file that verifies the origin)
  if [[ -n $ORIGIN_CA_CERT ]]; then
    cp "$ORIGIN_CA_CERT" "$RUNDIR/origin-ca.pem"; install -m 600 "$ORIGIN_CA_KEY" "$RUNDIR/origin-ca.key"
  else
    make_ca origin-ca "tls-upstream bench origin CA"
  fi
  ORIGIN_CA=$RUNDIR/origin-ca.pem
  # nginx checks the name with X509_check_host, which matches no IP address entry: it asks for
  # localhost, outbox for 127.0.0.1 (the address it connects to).
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n' >"$RUNDIR/leaf.ext"
  { openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
      -keyout "$RUNDIR/origin.key" -out "$RUNDIR/origin.csr" &&
    openssl x509 -req -in "$RUNDIR/origin.csr" -CA "$ORIGIN_CA" -CAkey "$RUNDIR/origin-ca.key" \
      -CAcreateserial -days 2 -extfile "$RUNDIR/leaf.ext" -out "$RUNDIR/origin.pem" &&
    openssl verify -purpose sslserver -CAfile "$ORIGIN_CA" "$RUNDIR/origin.pem"; } >"$RUNDIR/openssl.log" 2>&1 \
    || { cat "$RUNDIR/openssl.log" >&2; die "openssl could not make the origin's certificate"; }
  if wants intercept; then make_ca intercept-ca "tls-upstream bench interception CA"; fi
}

# ---------------------------------------------------------------- nginx configs
# The origin and the nginx proxy are forward.sh's templates with TLS switched on, so the
# http and https benchmarks measure the same nginx apart from TLS. TLS 1.3 is named on both
# sides: nginx 1.22 offers only up to 1.2 by default, while outbox and the clients speak 1.3.
render_tls() {  # template out sed-expression (must change the file)
  render "$1" "$2.plain"
  sed -e "$3" "$2.plain" >"$2"
  ! cmp -s "$2.plain" "$2" || die "$(basename "$1"): the line to switch to TLS is not there any more (tls-upstream.sh's sed)"
}
start_origin() {
  render_tls "$HERE/upstream.conf" "$RUNDIR/origin.conf" \
    "s|^\( *listen 127.0.0.1:$UP_PORT\) backlog=4096;|\1 ssl backlog=4096;\n        ssl_certificate $RUNDIR/origin.pem;\n        ssl_certificate_key $RUNDIR/origin.key;\n        ssl_session_cache shared:origin:1m;\n        ssl_protocols TLSv1.2 TLSv1.3;|"
  start_bg upstream nginx -p "$RUNDIR" -e "$RUNDIR/upstream.err" -c "$RUNDIR/origin.conf"
  UP_PID=$STARTED; wait_port "$UP_PORT" "$UP_PID" 10
  local code size res
  res=$(curl -sS -o /dev/null -w '%{http_code} %{size_download}' --max-time 5 \
    --cacert "$ORIGIN_CA" "https://$HOST:$UP_PORT/") || die "origin: GET https://$HOST:$UP_PORT/ failed"
  read -r code size <<<"$res"
  [[ $code == 200 && $size == 1024 ]] || die "origin: GET / gave $code/$size bytes over TLS, want 200/1024"
}
start_nginx_proxy() {
  render_tls "$HERE/nginx-proxy.conf" "$RUNDIR/nginx-proxy.conf" \
    "s|^\( *\)proxy_pass http://origin;|\1proxy_pass https://origin;\n\1proxy_ssl_session_reuse on;\n\1proxy_ssl_verify on;\n\1proxy_ssl_trusted_certificate $ORIGIN_CA;\n\1proxy_ssl_name localhost;\n\1proxy_ssl_protocols TLSv1.2 TLSv1.3;|"
  start_bg nginx nginx -p "$RUNDIR" -e "$RUNDIR/nginx-proxy.err" -c "$RUNDIR/nginx-proxy.conf"
  TPGID[nginx]=$STARTED; wait_port "$NGX_PORT" "$STARTED" 10
}

# ---------------------------------------------------------------- outbox configs
write_configs() {
  printf '{"tls":{"caFile":"%s"}}\n' "$ORIGIN_CA" >"$RUNDIR/outbox.json"
  printf '{"forwardProxy":{"connectPorts":[%s]}}\n' "$UP_PORT" >"$RUNDIR/tunnel.json"
  printf '{"forwardProxy":{"connectPorts":[%s]},"tls":{"caFile":"%s","intercept":{"hosts":["%s"],"caCertificateFile":"%s","caKeyFile":"%s"}}}\n' \
    "$UP_PORT" "$ORIGIN_CA" "$HOST" "$RUNDIR/intercept-ca.pem" "$RUNDIR/intercept-ca.key" >"$RUNDIR/intercept.json"
}

# ---------------------------------------------------------------- tunnel clients
declare -A TCA=() TOTHER=()  # per CONNECT target: the CA its clients trust, and the wrong one
tunnel_client() {  # port cafile ; sets TC, the client's command line up to its per-run flags
  TC=(python3 "$HERE/tunnel-client.py" --proxy "$HOST:$1" --target "$HOST:$UP_PORT" --cafile "$2"
      --body "$RUNDIR/body1k.json")
}
check_tunnel_target() {  # name
  local name=$1 rc=0 why
  tunnel_client "${TPORT[$name]}" "${TCA[$name]}"
  why=$(timeout 60 "${TC[@]}" --other-ca "${TOTHER[$name]}" --check 2>&1) || rc=$?
  ((rc == 0)) && return 0
  if ((rc == 3)) && [[ $name == intercept ]]; then
    die "intercept: outbox answered CONNECT $HOST:$UP_PORT with a byte tunnel (the origin's own certificate came back) instead of terminating TLS with a certificate from its interception CA: this build of outbox does not intercept yet (tls.intercept.hosts)"
  fi
  if ((rc == 3)); then
    die "tunnel: outbox terminated TLS for CONNECT $HOST:$UP_PORT although $HOST is not in its tls.intercept.hosts"
  fi
  die "$name: $why"
}

# run_tunnel target port method clients rep duration -> appends one TSV row (unless rep=warm)
run_tunnel() {
  local tgt=$1 port=$2 method=$3 clients=$4 rep=$5 dur=$6 out
  tunnel_client "$port" "${TCA[$tgt]}"
  cpu_mark "$tgt"
  out=$(timeout $((dur + 90)) "${TC[@]}" --method "$method" --clients "$clients" --duration "$dur" 2>&1) \
    || { echo "$out" >&2; die "tunnel-client.py failed/timed out: $tgt $method c$clients"; }
  echo "$tgt $method c$clients rep$rep $out" >>"$RUNDIR/tunnel-raw.txt"
  [[ $rep == warm ]] && return 0
  local -A kv=()
  local pair
  for pair in $out; do [[ $pair != *=* ]] || kv[${pair%%=*}]=${pair#*=}; done
  [[ -n ${kv[requests]:-} && -n ${kv[rps]:-} ]] || { echo "$out" >&2; die "could not parse tunnel-client.py output"; }
  ((kv[tunnels] <= clients)) || log "$tgt: ${kv[tunnels]} tunnels for $clients clients (the proxy closed some)"
  record_row "$tgt" "$method" "$clients" "$rep" "${kv[rps]}" "${kv[p50_us]}" "${kv[p99_us]}" "${kv[requests]}" "${kv[errors]}"
}

# ---------------------------------------------------------------- main
install_missing nginx wrk curl openssl python3
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

TPORT=([nginx]=$NGX_PORT [outbox]=$OBX_PORT [outbox-base]=$OBX_BASE_PORT [tunnel]=$TUN_PORT [intercept]=$ICP_PORT)

ports=("$UP_PORT")
for t in "${ALL_TARGETS[@]}"; do ports+=("${TPORT[$t]}"); done
check_ports_free "${ports[@]}"

if wants outbox || wants tunnel || wants intercept; then build_outbox; log "outbox binary: $OUTBOX_BIN"; fi
if ((BASELINE)); then build_baseline; log "outbox-base binary: $OUTBOX_BASELINE_BIN ($BASE_DESC)"; fi

make_rundir
make_certificates
write_configs

n_m=$(wc -w <<<"$METHODS")
EST=$(( n_m * $(wc -w <<<"$CONNS") * REPS * ${#WRK_TARGETS[@]} * (DURATION + 2) \
      + n_m * $(wc -w <<<"$TUNNEL_CLIENTS") * REPS * ${#TUNNEL_TARGETS[@]} * (DURATION + 3) \
      + n_m * ${#ALL_TARGETS[@]} * (WARMUP + 2) + 20 ))
MAX_TOTAL_S=${MAX_TOTAL_S:-$((EST + 300))}
log "targets: ${ALL_TARGETS[*]}; methods: $METHODS; conns: $CONNS (wrk), $TUNNEL_CLIENTS (tunnel clients); reps: $REPS x ${DURATION}s; est. ${EST}s (cap ${MAX_TOTAL_S}s)"
log "rundir: $RUNDIR"

start_origin
TCA=([tunnel]=$ORIGIN_CA [intercept]=$RUNDIR/intercept-ca.pem)
TOTHER=([tunnel]=$RUNDIR/intercept-ca.pem [intercept]=$ORIGIN_CA)
for t in "${ALL_TARGETS[@]}"; do
  case $t in
    nginx) start_nginx_proxy ;;
    outbox) start_outbox outbox "$OUTBOX_BIN" "https://$HOST:$UP_PORT" --config "$RUNDIR/outbox.json" ;;
    outbox-base) start_outbox outbox-base "$OUTBOX_BASELINE_BIN" "https://$HOST:$UP_PORT" --config "$RUNDIR/outbox.json" ;;
    tunnel) start_outbox tunnel "$OUTBOX_BIN" "" --config "$RUNDIR/tunnel.json" ;;
    intercept) start_outbox intercept "$OUTBOX_BIN" "" --config "$RUNDIR/intercept.json" ;;
  esac
  case $t in
    tunnel | intercept) check_tunnel_target "$t" ;;
    nginx) check_target nginx "$NGX_PORT" ;;
    *) check_target "$t" "${TPORT[$t]}" " (a build whose https:// path reads only the system trust store ignores tls.caFile: see ORIGIN_CA_CERT)" ;;
  esac
  log "$t ok on $HOST:${TPORT[$t]}"
done

if ((${#WRK_TARGETS[@]})); then run_matrix run_wrk "$CONNS" 64 "${WRK_TARGETS[@]}"; fi
if ((${#TUNNEL_TARGETS[@]})); then run_matrix run_tunnel "$TUNNEL_CLIENTS" "${TUNNEL_CLIENTS%% *}" "${TUNNEL_TARGETS[@]}"; fi

[[ -z $RESULTS ]] || cp "$RAW" "$RESULTS"

# ---------------------------------------------------------------- summary
echo
echo "# https-upstream benchmark: median of $REPS interleaved runs of ${DURATION}s; $(nproc) CPUs shared by the clients, the proxy and the origin"
echo "# origin: nginx worker_processes 1 over TLS (EC P-256 certificate for 127.0.0.1 and localhost); $(openssl version | cut -d' ' -f1-2)"
if ((${#WRK_TARGETS[@]})); then
  echo "# ${WRK_TARGETS[*]}: wrk -t$THREADS (plain HTTP to the proxy)$(wants nginx && echo "; nginx-proxy workers=$WORKERS keepalive=$NGX_KEEPALIVE, proxy_ssl_session_reuse on")"
fi
if ((${#TUNNEL_TARGETS[@]})); then
  echo "# ${TUNNEL_TARGETS[*]}: tunnel-client.py, conns = client processes, each on one kept-alive CONNECT tunnel (req/s is the Python clients' limit: read prx_us)"
fi
if ((BASELINE)); then echo "# outbox: $OBX_DESC; outbox-base: $BASE_DESC"; fi
print_summary "outbox/nginx intercept/tunnel"

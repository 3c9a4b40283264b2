#!/usr/bin/env bash
# docker/test.sh: builds the image from docker/Dockerfile with a real Docker engine and checks
# what a user of the image relies on. Run from anywhere, as root: `bash docker/test.sh`.
#
#   - the build, `--version`, a non-root user;
#   - a write while the upstream is down gets 202; `docker stop` exits 0 within the grace
#     period; a new container on the same volume delivers that write once the upstream is back;
#   - the health check reports healthy, with `listen` changed from the image's 8080;
#   - the compose demo's configs (docker/config.json, and config-postgres.json of the fleet
#     profile) pass `outbox check-config` in the image.
#
# Its own engine: dockerd --bridge=none --iptables=false on a socket of its own (a Docker the
# machine already runs is not touched), stopped by pid on every exit; it stays in the caller's
# session, so .ci/run's stop of the step's session ends it even if this script is killed.
# Containers use --network host and Outbox listens on 127.0.0.1 only, so nothing is sent to a
# container bridge or a private-range address. Missing docker.io or debootstrap are installed with
# apt-get (INSTALL=0 refuses instead).
#
# Base images: pulled when a registry answers. Where none does (these machines reach Debian's
# mirror and PyPI only), stand-ins are built from Debian packages: `debootstrap --variant=minbase
# bookworm` imported as debian:bookworm-slim, and that root plus the build packages of the
# official Swift image and this machine's Swift toolchain imported as swift:6.3-bookworm. The
# classic builder is used (DOCKER_BUILDKIT=0) because BuildKit fetches its `# syntax=` frontend
# from a registry; the classic builder reads .dockerignore only at the context root, so the
# build context is a copy of the tree with docker/Dockerfile.dockerignore as its .dockerignore.
#
# Knobs (env): OUTBOX_DOCKER_CACHE (default /var/tmp/outbox-docker-test: the engine's data and
#   the stand-ins, kept between runs; remove it to start cold), INSTALL=0, SWIFT_TOOLCHAIN
#   (directory holding usr/bin/swift; default: found from `swift` on PATH or /opt/swift).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${OUTBOX_DOCKER_CACHE:-/var/tmp/outbox-docker-test}
INSTALL=${INSTALL:-1}
IMAGE=outbox:docker-test
PREFIX=outbox-docker-test
MIRROR=http://deb.debian.org/debian
WORK=$(mktemp -d /tmp/outbox-docker.XXXXXX)
T0=$SECONDS
FAILED=0
DOCKERD_PID=""
UPSTREAM_PID=""

log() { printf '[docker-test %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
ok() { printf 'ok    %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; FAILED=$((FAILED + 1)); }
die() { printf 'FAIL  %s\n' "$*"; exit 1; }

# ---------------------------------------------------------------- cleanup
stop_pid() {  # pid grace_seconds: TERM, wait, KILL
  local pid=$1 grace=$2 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$? m
  trap - EXIT INT TERM
  if [[ -n $DOCKERD_PID ]] && kill -0 "$DOCKERD_PID" 2>/dev/null; then
    docker ps -aq --filter "name=$PREFIX" 2>/dev/null | xargs -r docker rm -f >/dev/null 2>&1 || true
    docker volume ls -q --filter "name=$PREFIX" 2>/dev/null | xargs -r docker volume rm -f >/dev/null 2>&1 || true
    # dockerd stops the containerd it started; containers are gone already.
    stop_pid "$DOCKERD_PID" 30
  fi
  [[ -z $UPSTREAM_PID ]] || stop_pid "$UPSTREAM_PID" 5
  # Mounts the engine may leave when it was killed (overlay layers, its netns/exec root).
  for m in $(awk -v c="$CACHE/" -v w="$WORK/" 'index($2, c) == 1 || index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$WORK"
  if ((rc == 0 && FAILED == 0)); then
    log "passed in $((SECONDS - T0)) s"
  else
    log "FAILED (exit $rc, $FAILED check(s) failed) after $((SECONDS - T0)) s"
    ((rc != 0)) || rc=1
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- tools
[[ $(id -u) == 0 ]] || die "docker/test.sh runs its own dockerd and needs root (uid $(id -u))"
need=()
command -v dockerd >/dev/null && command -v docker >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
if ((${#need[@]})); then
  [[ $INSTALL == 1 ]] || die "missing ${need[*]} and INSTALL=0"
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 apt-get update -qq >"$WORK/apt.log" 2>&1 || { tail -20 "$WORK/apt.log" >&2; die "apt-get update failed"; }
  timeout 900 apt-get install -y -qq --no-install-recommends "${need[@]}" >>"$WORK/apt.log" 2>&1 ||
    { tail -30 "$WORK/apt.log" >&2; die "apt-get install ${need[*]} failed"; }
fi

if [[ -z ${SWIFT_TOOLCHAIN:-} ]]; then
  swift_bin=$(command -v swift || echo /opt/swift/usr/bin/swift)
  SWIFT_TOOLCHAIN=$(cd "$(dirname "$(readlink -f "$swift_bin")")/../.." && pwd)
fi
[[ -x $SWIFT_TOOLCHAIN/usr/bin/swift ]] || die "no Swift toolchain at $SWIFT_TOOLCHAIN (set SWIFT_TOOLCHAIN)"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# ---------------------------------------------------------------- the engine
mkdir -p "$CACHE/docker" "$CACHE/exec"
export DOCKER_HOST=unix://$WORK/docker.sock
log "starting dockerd (data in $CACHE/docker)"
dockerd --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
  --data-root "$CACHE/docker" --exec-root "$CACHE/exec" --pidfile "$WORK/dockerd.pid" \
  -H "$DOCKER_HOST" >"$WORK/dockerd.log" 2>&1 </dev/null &
DOCKERD_PID=$!
for ((i = 0; i < 600; i++)); do
  docker version >/dev/null 2>&1 && break
  kill -0 "$DOCKERD_PID" 2>/dev/null || { tail -30 "$WORK/dockerd.log" >&2; die "dockerd exited while starting"; }
  sleep 0.1
done
docker version >/dev/null 2>&1 || { tail -30 "$WORK/dockerd.log" >&2; die "dockerd not answering after 60 s"; }
# Leftovers of a run that was killed.
docker ps -aq --filter "name=$PREFIX" | xargs -r docker rm -f >/dev/null
docker volume ls -q --filter "name=$PREFIX" | xargs -r docker volume rm -f >/dev/null
ok "dockerd $(docker version --format '{{.Server.Version}}') started (--bridge=none --iptables=false)"

# ---------------------------------------------------------------- base images
# The FROM lines, so the stand-ins follow the Dockerfile.
mapfile -t bases < <(awk 'toupper($1) == "FROM" { print $2 }' "$ROOT/docker/Dockerfile")
BUILD_BASE=${bases[0]}
RUN_BASE=${bases[1]}

# Each stand-in is named by a key of what it is made from (its package list; for the build
# base also the toolchain's version), kept as the image's label: a changed list or toolchain
# makes a new one instead of reusing a stale image from the cache. Each builder sets ROOTFS
# (not printed and captured: a `die` in a command substitution would only end the subshell).
ROOTFS=""
key_of() { printf '%s' "$*" | sha256sum | cut -c1-16; }

# What the official swift:*-bookworm image installs besides the toolchain.
SWIFT_IMAGE_PACKAGES=binutils,git,gnupg2,libc6-dev,libcurl4-openssl-dev,libedit2,libgcc-12-dev,libncurses-dev,libpython3-dev,libsqlite3-0,libstdc++-12-dev,libxml2-dev,libz3-dev,pkg-config,tzdata,zlib1g-dev,unzip,ca-certificates
BOOKWORM_KEY=$(key_of "minbase bookworm")
SWIFT_KEY=$(key_of "minbase bookworm $SWIFT_IMAGE_PACKAGES $("$SWIFT_TOOLCHAIN/usr/bin/swift" --version 2>&1 | head -1)")

debootstrap_root() {  # root log [extra debootstrap args...]
  local root=$1 logfile=$2
  shift 2
  rm -rf "$root"; mkdir -p "$root" "$CACHE/debs"
  timeout 900 debootstrap --variant=minbase --cache-dir="$CACHE/debs" "$@" bookworm "$root" "$MIRROR" >"$logfile" 2>&1 ||
    { tail -30 "$logfile" >&2; die "debootstrap bookworm $* failed"; }
  rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/archives/"*.deb
}

bookworm_root() {
  local root=$CACHE/roots/bookworm-$BOOKWORM_KEY
  if [[ ! -f $root.ok ]]; then
    log "debootstrap --variant=minbase bookworm (a stand-in for $RUN_BASE)"
    debootstrap_root "$root" "$WORK/debootstrap.log"
    touch "$root.ok"
  fi
  ROOTFS=$root
}

swift_root() {
  local root=$CACHE/roots/swift-$SWIFT_KEY
  if [[ ! -f $root.ok ]]; then
    log "debootstrap bookworm with the Swift image's packages, plus $SWIFT_TOOLCHAIN (a stand-in for $BUILD_BASE)"
    debootstrap_root "$root" "$WORK/debootstrap-swift.log" --include="$SWIFT_IMAGE_PACKAGES"
    # The toolchain at /usr as in the official image; the debugger, the language server and
    # documentation tools are not needed to build.
    tar -C "$SWIFT_TOOLCHAIN" -c --exclude='usr/bin/lldb*' --exclude='usr/lib/liblldb*' \
      --exclude='usr/bin/sourcekit-lsp' --exclude='usr/lib/libsourcekitdInProc.so' \
      --exclude='usr/bin/clangd' --exclude='usr/bin/docc' --exclude='usr/share/docc' usr |
      tar -C "$root" -x --keep-directory-symlink
    touch "$root.ok"
  fi
  ROOTFS=$root
}

base_image() {  # image builder key [command that must run in a stand-in]
  local image=$1 builder=$2 key=$3 label
  if label=$(docker image inspect -f '{{index .Config.Labels "outbox.stand-in"}}' "$image" 2>/dev/null); then
    if [[ -z $label || $label == "<no value>" ]]; then ok "base image $image present"; return; fi
    if [[ $label == "$key" ]]; then ok "base image $image: stand-in $key from an earlier run"; return; fi
    log "base image $image is stand-in $label, made from something else: making $key"
  elif timeout 60 docker pull -q "$image" >"$WORK/pull.log" 2>&1; then
    ok "base image $image pulled"
    return
  else
    log "cannot pull $image ($(tail -1 "$WORK/pull.log" | cut -c1-120)); building a stand-in"
  fi
  "$builder"
  tar -C "$ROOTFS" -c . | docker import --change 'CMD ["bash"]' --change "LABEL outbox.stand-in=$key" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$image" >/dev/null
  # A library the toolchain needs and the package list lacks shows here, not in the build.
  if (($# > 3)) && ! docker run --rm --network host "$image" "${@:4}" >"$WORK/stand-in-check.log" 2>&1; then
    cat "$WORK/stand-in-check.log" >&2
    docker image rm -f "$image" >/dev/null
    die "the stand-in $image cannot run: ${*:4}"
  fi
  ok "base image $image: stand-in $key from Debian packages"
}
base_image "$RUN_BASE" bookworm_root "$BOOKWORM_KEY"
base_image "$BUILD_BASE" swift_root "$SWIFT_KEY" swift build --version

# ---------------------------------------------------------------- the build
CTX=$WORK/context
mkdir -p "$CTX"
tar -C "$ROOT" -c --exclude=./.build --exclude=./.git --exclude=./.swiftpm . | tar -C "$CTX" -x
cp "$ROOT/docker/Dockerfile.dockerignore" "$CTX/.dockerignore"
log "docker build (classic builder, --network host)"
t=$SECONDS
if DOCKER_BUILDKIT=0 timeout 1500 docker build --network host -f "$CTX/docker/Dockerfile" -t "$IMAGE" "$CTX" >"$WORK/build.log" 2>&1; then
  ok "docker build -f docker/Dockerfile ($((SECONDS - t)) s, $(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }'))"
else
  tail -40 "$WORK/build.log"
  die "docker build failed"
fi

# ---------------------------------------------------------------- checks
version=$(docker run --rm --network host "$IMAGE" --version 2>&1) || true
if [[ $version =~ ^outbox\ [0-9] ]]; then ok "--version: $version"; else fail "--version printed '$version'"; fi

uid=$(docker run --rm --network host --entrypoint id "$IMAGE" -u 2>&1) || true
user=$(docker image inspect -f '{{.Config.User}}' "$IMAGE")
if [[ $uid != 0 && $uid =~ ^[0-9]+$ && -n $user ]]; then ok "runs as user $user (uid $uid)"; else fail "user '$user', uid '$uid'"; fi

if out=$(docker run --rm --network host -v "$ROOT/docker/config.json:/etc/outbox/config.json:ro" "$IMAGE" check-config 2>&1); then
  ok "compose demo's docker/config.json passes check-config in the image"
else
  fail "check-config of docker/config.json: $(head -3 <<<"$out")"
fi
if out=$(docker run --rm --network host -e PGPASSWORD=not-shown -v "$ROOT/docker/config-postgres.json:/etc/outbox/config.json:ro" \
  "$IMAGE" check-config 2>&1) && grep -q '"store": "postgres"' <<<"$out"; then
  ok "compose fleet's docker/config-postgres.json passes check-config in the image (libpq is in it)"
else
  fail "check-config of docker/config-postgres.json: $(head -3 <<<"$out")"
fi

OUTBOX_PORT=$(free_port)
UPSTREAM_PORT=$(free_port)
VOLUME=$PREFIX-data
docker volume create "$VOLUME" >/dev/null
serve() {  # name, extra docker args...: Outbox on 127.0.0.1:$OUTBOX_PORT in front of the upstream port
  local name=$1; shift
  docker run -d --name "$PREFIX-$name" --network host -v "$VOLUME:/var/lib/outbox" "$@" "$IMAGE" \
    serve --listen "127.0.0.1:$OUTBOX_PORT" --upstream "http://127.0.0.1:$UPSTREAM_PORT" >/dev/null
}
status_json() { curl -sf --max-time 5 "http://127.0.0.1:$OUTBOX_PORT/admin/status"; }
wait_ready() {  # container
  for ((i = 0; i < 300; i++)); do
    status_json >/dev/null 2>&1 && return 0
    [[ $(docker inspect -f '{{.State.Running}}' "$1") == true ]] || { docker logs "$1" 2>&1 | tail -20; return 1; }
    sleep 0.1
  done
  status_json >/dev/null 2>&1
}

# A write while the upstream is down (nothing listens on its port).
serve first
wait_ready "$PREFIX-first" || die "the first container did not answer /admin/status within 30 s"
BODY='{"order":"docker-test-'$$'"}'
code=$(curl -s -o "$WORK/202.json" -D "$WORK/202.headers" -w '%{http_code}' --max-time 30 \
  -X POST -H 'Content-Type: application/json' --data "$BODY" "http://127.0.0.1:$OUTBOX_PORT/v1/orders") || true
OP_ID=$(tr -d '\r' <"$WORK/202.headers" | awk -F': ' 'tolower($1) == "outbox-operation-id" { print $2 }')
if [[ $code == 202 && -n $OP_ID ]]; then ok "a write with the upstream down: 202, operation $OP_ID"; else fail "a write with the upstream down got $code ($(head -c 200 "$WORK/202.json"))"; fi

# docker stop: SIGTERM, Outbox flushes and exits 0 before the grace period ends.
GRACE=20
t=$SECONDS
docker stop -t "$GRACE" "$PREFIX-first" >/dev/null
elapsed=$((SECONDS - t))
exit_code=$(docker inspect -f '{{.State.ExitCode}}' "$PREFIX-first")
if [[ $exit_code == 0 ]] && ((elapsed < GRACE)); then ok "docker stop -t $GRACE: exit 0 after ${elapsed} s"; else fail "docker stop -t $GRACE: exit code $exit_code after ${elapsed} s"; fi
docker rm "$PREFIX-first" >/dev/null

# The upstream comes back; a new container on the same volume delivers the write.
python3 -u - "$UPSTREAM_PORT" "$WORK/received" >"$WORK/upstream.log" 2>&1 <<'EOF' &
import http.server, sys
port, path = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(path, "ab") as f:
            f.write(self.command.encode() + b" " + self.path.encode() + b" " + body + b"\n")
        self.send_response(201); self.send_header("Content-Length", "0"); self.end_headers()
    do_GET = do_HEAD = lambda self: (self.send_response(200), self.send_header("Content-Length", "0"), self.end_headers())
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
EOF
UPSTREAM_PID=$!
serve second
wait_ready "$PREFIX-second" || die "the second container did not answer /admin/status within 30 s"
delivered=0
for ((i = 0; i < 600; i++)); do
  if grep -qF "POST /v1/orders $BODY" "$WORK/received" 2>/dev/null; then delivered=1; break; fi
  sleep 0.1
done
grep -qF "POST /v1/orders $BODY" "$WORK/received" 2>/dev/null && delivered=1
op_status=$(curl -sf --max-time 5 "http://127.0.0.1:$OUTBOX_PORT/admin/operations/$OP_ID" | python3 -c 'import json, sys; print(json.load(sys.stdin)["status"])' 2>/dev/null || true)
if ((delivered)); then ok "a new container on the same volume delivered it (operation $OP_ID: ${op_status:-?})"; else fail "the write was not delivered within 60 s (operation $OP_ID: ${op_status:-unknown})"; fi
docker stop -t "$GRACE" "$PREFIX-second" >/dev/null
docker rm "$PREFIX-second" >/dev/null

# The health check, its command as the image declares it, on a config whose listen is not
# 8080 and with a token set as docker/README.md advises. Only the interval is shortened.
HEALTH_PORT=$(free_port)
printf '{ "listen": "127.0.0.1:%s", "dataDirectory": "/var/lib/outbox", "forwardProxy": { "enabled": false } }\n' "$HEALTH_PORT" >"$WORK/health-config.json"
chmod 0644 "$WORK/health-config.json"
docker run -d --name "$PREFIX-health" --network host --health-interval 1s --health-start-period 0s \
  -e OUTBOX_ADMIN_TOKEN="t$RANDOM$RANDOM$RANDOM" -v "$WORK/health-config.json:/etc/outbox/config.json:ro" "$IMAGE" >/dev/null
health=""
for ((i = 0; i < 600; i++)); do
  health=$(docker inspect -f '{{.State.Health.Status}}' "$PREFIX-health")
  [[ $health == starting ]] || break
  sleep 0.1
done
health=$(docker inspect -f '{{.State.Health.Status}}' "$PREFIX-health")
probe=$(docker inspect -f '{{range .State.Health.Log}}{{.Output}}{{end}}' "$PREFIX-health" | grep -v '^$' | tail -1 || true)
if [[ $health == healthy ]]; then ok "health check: healthy with listen 127.0.0.1:$HEALTH_PORT ($probe)"; else fail "health check: '$health' with listen 127.0.0.1:$HEALTH_PORT ($probe)"; fi
docker rm -f "$PREFIX-health" >/dev/null

((FAILED == 0)) || exit 1

#!/usr/bin/env bash
# Container engine for the image tests, on machines without a Docker engine and without
# access to any container registry.
#
#   bash scripts/podman-setup.sh up      install + configure podman, build the local base
#                                        image(s) if missing, start the Docker-compatible API
#                                        socket; prints `export ...` lines on stdout, so:
#                                          eval "$(bash scripts/podman-setup.sh up)"
#   bash scripts/podman-setup.sh install podman, runc, debootstrap, podman-compose
#                                        + /etc/containers/containers.conf
#   bash scripts/podman-setup.sh base    the local stand-in images (cached: once per machine):
#                                        node:20-bookworm-slim, prom/prometheus:v2.55.1
#   bash scripts/podman-setup.sh rootfs  the cached Debian minbase tarball (prints its path)
#   bash scripts/podman-setup.sh start   start `podman system service` (if no socket answers)
#   bash scripts/podman-setup.sh stop    stop the service this script started (pid file)
#   bash scripts/podman-setup.sh env     print the environment for testcontainers
#   bash scripts/podman-setup.sh status  show what is there
#
# Why each piece:
# - crun fails on this kernel's hybrid cgroup layout: runc + cgroupfs instead.
# - containers get lower ulimits (the defaults copied from the host are too high for runc here).
# - nothing can be pulled, so the base image that docker/Dockerfile.* names in FROM
#   (node:20-bookworm-slim) is made here: `debootstrap --variant=minbase bookworm` plus this
#   machine's Node 20 (node + npm), imported and tagged docker.io/library/node:20-bookworm-slim,
#   the name Docker normalises `node:20-bookworm-slim` to. The SAME Dockerfile thus builds
#   unchanged in the real world, where the official image is pulled.
#   The builder stage installs its toolchain with apt-get from Debian's mirror.
# - testcontainers talks to podman's Docker-compatible socket; Ryuk is disabled (podman runs
#   no reaper image here) and the host is pinned to 127.0.0.1 so test traffic stays on loopback.
#
# Everything is idempotent. All logs go to stderr; only `env`/`up` print on stdout.
set -euo pipefail

BASE_IMAGE="${SVC_BASE_IMAGE:-docker.io/library/node:20-bookworm-slim}"
PROM_IMAGE="${SVC_PROMETHEUS_IMAGE:-docker.io/prom/prometheus:v2.55.1}"
SUITE="${SVC_BASE_SUITE:-bookworm}"
MIRROR="${SVC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE_DIR="${SVC_PODMAN_CACHE:-/var/cache/svc-podman}"
SOCK_DIR=/run/podman
SOCK="$SOCK_DIR/podman.sock"
PIDFILE="$SOCK_DIR/svc-podman-service.pid"
LOGFILE="$SOCK_DIR/svc-podman-service.log"
CONF=/etc/containers/containers.conf

log() { printf '[podman-setup] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_pkgs() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  [ -x /usr/sbin/runc ] || missing+=(runc)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v podman-compose >/dev/null 2>&1 || missing+=(podman-compose)
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]} from Debian"
    as_root apt-get update -qq >&2
    # With podman's recommends (netavark, aardvark-dns, catatonit, slirp4netns, uidmap, ...).
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq podman runc debootstrap curl podman-compose >&2
  fi
  write_conf
}

write_conf() {
  local want
  want=$(cat <<'EOF'
# Written by svc scripts/podman-setup.sh
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1000:1000"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[engine.runtimes]
runc = ["/usr/sbin/runc"]
EOF
)
  if [ -f "$CONF" ] && [ "$(cat "$CONF")" = "$want" ]; then
    return 0
  fi
  if [ -f "$CONF" ] && ! grep -q 'svc scripts/podman-setup.sh' "$CONF"; then
    as_root cp "$CONF" "$CONF.svc-backup.$(date +%s)"
    log "kept the previous $CONF as a backup"
  fi
  as_root mkdir -p /etc/containers
  printf '%s\n' "$want" | as_root tee "$CONF" >/dev/null
  log "wrote $CONF"
}

# The Debian minbase root filesystem every local stand-in image starts from (cached tarball;
# prints its path). debootstrap runs once per machine.
ensure_rootfs() {
  local tarball="$CACHE_DIR/debian-$SUITE-minbase.tar"
  as_root mkdir -p "$CACHE_DIR"
  if [ ! -s "$tarball" ]; then
    local root="$CACHE_DIR/rootfs-$SUITE"
    as_root rm -rf "$root"
    log "debootstrap --variant=minbase $SUITE (about a minute)"
    local t0=$SECONDS
    as_root debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >&2 \
      || die "debootstrap failed (is $MIRROR reachable?)"
    # Same apt sources as the official Debian images (with security + updates).
    as_root rm -f "$root/etc/apt/sources.list"
    as_root tee "$root/etc/apt/sources.list.d/debian.sources" >/dev/null <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    as_root chroot "$root" apt-get clean >&2 || true
    as_root rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin "$root/var/log/"*.log
    as_root tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
    as_root mv "$tarball.tmp" "$tarball"
    as_root rm -rf "$root"
    log "debootstrap done in $((SECONDS - t0)) s, cached at $tarball"
  else
    log "reusing cached $tarball"
  fi

  echo "$tarball"
}

# This machine's own trust: local CAs (e.g. a TLS-inspecting egress proxy in front of the
# npm registry) into a stand-in's root filesystem. Debian's place for them is
# /usr/local/share/ca-certificates, which `apt-get install ca-certificates` in a builder stage
# folds into the system bundle; Node reads the bundle through NODE_EXTRA_CA_CERTS (the caller
# sets it when this returns 0). The official images need none of this.
add_local_cas() {
  local stage="$1"
  ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1 || return 1
  as_root mkdir -p "$stage/usr/local/share/ca-certificates" "$stage/etc/ssl/certs"
  as_root cp /usr/local/share/ca-certificates/*.crt "$stage/usr/local/share/ca-certificates/"
  cat /usr/local/share/ca-certificates/*.crt | as_root tee "$stage/etc/ssl/certs/ca-certificates.crt" >/dev/null
}

# The base image: Debian bookworm minbase + this machine's Node 20 laid out as the official
# node image does (/usr/local/bin/node, /usr/local/lib/node_modules/npm, user node uid 1000).
base_stamp() {
  # What the base image is made of on this machine: Node's version and the local CAs.
  { "$(readlink -f "$(command -v node)")" -v
    cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true
    echo "$SUITE"
  } | sha256sum | cut -c1-16
}

build_base() {
  local stamp have
  stamp="$(base_stamp)"
  if podman image exists "$BASE_IMAGE" 2>/dev/null; then
    have="$(podman image inspect --format '{{index .Labels "org.svc.base-stamp"}}' "$BASE_IMAGE" 2>/dev/null || true)"
    if [ "${1:-}" != "--force" ]; then
      if [ "$have" = "$stamp" ]; then log "base image $BASE_IMAGE present"; return 0; fi
      if [ -z "$have" ] || [ "$have" = "<no value>" ]; then
        log "base image $BASE_IMAGE present (not made here: kept)"; return 0
      fi
    fi
    log "base image $BASE_IMAGE is stale (stamp $have, want $stamp): rebuilding"
  fi
  local node_bin node_ver npm_dir tarball
  node_bin="$(readlink -f "$(command -v node)")" || die "node not found on this machine"
  node_ver="$("$node_bin" -v)"
  case "$node_ver" in v20.*) ;; *) die "need Node 20 on this machine for $BASE_IMAGE, found $node_ver";; esac
  npm_dir=""
  for d in "$(dirname "$node_bin")/../lib/node_modules/npm" /usr/lib/node_modules/npm /usr/local/lib/node_modules/npm; do
    if [ -f "$d/bin/npm-cli.js" ]; then npm_dir="$(readlink -f "$d")"; break; fi
  done
  [ -n "$npm_dir" ] || die "npm's folder not found next to $node_bin"

  tarball="$(ensure_rootfs)"

  # Layer Node on top, as the official image does.
  local stage
  stage="$(mktemp -d)"
  trap 'as_root rm -rf "$stage"' RETURN
  as_root tar -C "$stage" -xf "$tarball"
  as_root install -D -m 0755 "$node_bin" "$stage/usr/local/bin/node"
  as_root mkdir -p "$stage/usr/local/lib/node_modules"
  as_root cp -a "$npm_dir" "$stage/usr/local/lib/node_modules/npm"
  as_root ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$stage/usr/local/bin/npm"
  as_root ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$stage/usr/local/bin/npx"
  local extra_ca=()
  add_local_cas "$stage" && extra_ca=(--change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt')
  if ! grep -q '^node:' "$stage/etc/passwd"; then
    as_root chroot "$stage" groupadd --gid 1000 node
    as_root chroot "$stage" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
  fi
  as_root tar -C "$stage" --numeric-owner -cf "$CACHE_DIR/base.tar" .
  log "importing $BASE_IMAGE (node $node_ver)"
  as_root podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "ENV NODE_VERSION=${node_ver#v}" \
    --change 'CMD ["node"]' \
    --change 'LABEL org.svc.local-base=true' \
    --change "LABEL org.svc.base-stamp=$stamp" \
    "${extra_ca[@]}" \
    "$CACHE_DIR/base.tar" "$BASE_IMAGE" >&2
  as_root rm -f "$CACHE_DIR/base.tar"
}

# Prometheus for docker/compose.yaml: prom/prometheus:v2.55.1 cannot be pulled, so a stand-in
# is made from Debian's `prometheus` package (bookworm: 2.42; its binaries only, taken from the
# .deb with dpkg-deb -x, so none of the package's web-asset dependencies) on the minbase root
# filesystem, laid out as the official image: /bin/prometheus and /bin/promtool, config
# /etc/prometheus/prometheus.yml, data in /prometheus owned by nobody, the same entrypoint,
# default arguments, user and port. Tagged docker.io/prom/prometheus:v2.55.1 (the name Docker
# gives `prom/prometheus:v2.55.1`) so compose.yaml runs unchanged; the real image is pulled elsewhere.
build_prometheus() {
  local deb stamp have tarball stage
  as_root mkdir -p "$CACHE_DIR/debs"
  deb="$(ls "$CACHE_DIR"/debs/prometheus_*.deb 2>/dev/null | tail -1 || true)"
  if [ -z "$deb" ]; then
    log "apt-get download prometheus"
    (cd "$CACHE_DIR/debs" && as_root apt-get download -q prometheus >&2 2>/dev/null) ||
      { as_root apt-get update -qq >&2; (cd "$CACHE_DIR/debs" && as_root apt-get download -q prometheus >&2); }
    deb="$(ls "$CACHE_DIR"/debs/prometheus_*.deb | tail -1)"
  fi
  stamp="$({ basename "$deb"; echo "$SUITE"; } | sha256sum | cut -c1-16)"
  have="$(podman image inspect --format '{{index .Labels "org.svc.base-stamp"}}' "$PROM_IMAGE" 2>/dev/null || true)"
  if [ "$have" = "$stamp" ] && [ "${1:-}" != "--force" ]; then log "$PROM_IMAGE present"; return 0; fi
  tarball="$(ensure_rootfs)"
  stage="$(mktemp -d)"
  # shellcheck disable=SC2064
  trap "as_root rm -rf '$stage'" RETURN
  as_root tar -C "$stage" -xf "$tarball"
  as_root dpkg-deb -x "$deb" "$stage/tmp/deb"
  as_root install -m 0755 "$stage/tmp/deb/usr/bin/prometheus" "$stage/tmp/deb/usr/bin/promtool" "$stage/bin/"
  as_root install -D -m 0644 "$stage/tmp/deb/etc/prometheus/prometheus.yml" "$stage/etc/prometheus/prometheus.yml"
  as_root mkdir -p "$stage/usr/share/prometheus" "$stage/prometheus"
  as_root cp -a "$stage/tmp/deb/usr/share/doc/prometheus/examples/consoles" \
    "$stage/tmp/deb/usr/share/doc/prometheus/examples/console_libraries" "$stage/usr/share/prometheus/"
  as_root chown 65534:65534 "$stage/prometheus"
  as_root rm -rf "$stage/tmp/deb"
  log "importing $PROM_IMAGE (Debian $(basename "$deb" .deb))"
  as_root tar -C "$stage" --numeric-owner -cf "$CACHE_DIR/prometheus.tar" .
  as_root podman import \
    --change 'USER nobody' \
    --change 'EXPOSE 9090' \
    --change 'VOLUME ["/prometheus"]' \
    --change 'WORKDIR /prometheus' \
    --change 'ENTRYPOINT ["/bin/prometheus"]' \
    --change 'CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", "--web.console.libraries=/usr/share/prometheus/console_libraries", "--web.console.templates=/usr/share/prometheus/consoles"]' \
    --change 'LABEL org.svc.local-base=true' \
    --change "LABEL org.svc.base-stamp=$stamp" \
    "$CACHE_DIR/prometheus.tar" "$PROM_IMAGE" >&2
  as_root rm -f "$CACHE_DIR/prometheus.tar"
}

sock_alive() {
  [ -S "$SOCK" ] && curl -fsS --max-time 3 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1
}

start_service() {
  if sock_alive; then
    log "podman API already answering on $SOCK"
    return 0
  fi
  as_root mkdir -p "$SOCK_DIR"
  rm -f "$SOCK"
  log "starting podman system service on unix://$SOCK"
  # setsid: its own process group, so the caller's job control does not take it down.
  setsid podman system service --time=0 "unix://$SOCK" >"$LOGFILE" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  for _ in $(seq 1 100); do
    sock_alive && { log "podman API up (pid $(cat "$PIDFILE"))"; return 0; }
    sleep 0.2
  done
  die "podman API did not come up; see $LOGFILE"
}

stop_service() {
  if [ -f "$PIDFILE" ]; then
    local pid
    pid="$(cat "$PIDFILE")"
    if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q 'podman system service'; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      log "stopped podman service (pid $pid)"
    fi
    rm -f "$PIDFILE"
  else
    log "no podman service started by this script"
  fi
}

print_env() {
  cat <<EOF
export DOCKER_HOST=unix://$SOCK
export TESTCONTAINERS_RYUK_DISABLED=true
export TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1
EOF
}

status() {
  podman --version >&2 || true
  podman image exists "$BASE_IMAGE" && log "base image: $BASE_IMAGE" || log "base image missing"
  podman image exists "$PROM_IMAGE" && log "prometheus image: $PROM_IMAGE" || log "prometheus image missing"
  sock_alive && log "API: up on $SOCK" || log "API: down"
}

# Sourced (scripts/cuda-base-images.sh): functions only.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

cmd="${1:-up}"
case "$cmd" in
  install) install_pkgs ;;
  base) install_pkgs; build_base "${2:-}"; build_prometheus "${2:-}" ;;
  rootfs) ensure_rootfs ;;
  start) start_service ;;
  stop) stop_service ;;
  env) print_env ;;
  status) status ;;
  up) install_pkgs; build_base; build_prometheus; start_service; print_env ;;
  *) die "unknown command $cmd (install|base|rootfs|start|stop|env|status|up)" ;;
esac

#!/usr/bin/env bash
# Debian packages the build and the tests need (idempotent; skips what is present).
set -euo pipefail
need=()
for pair in cmake:cmake g++:g++ git:git make:make python3:python3 podman:podman runc:runc debootstrap:debootstrap podman-compose:podman-compose ffmpeg:ffmpeg pdftotext:poppler-utils; do
  bin=${pair%%:*}; pkg=${pair##*:}
  if [ "$bin" = runc ]; then [ -x /usr/sbin/runc ] || need+=("$pkg"); continue; fi
  command -v "$bin" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "missing packages: ${need[*]} (install them as root)" >&2; exit 1; fi
  echo "installing: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

#!/usr/bin/env bash
# Local stand-ins for the two nvidia/cuda images docker/Dockerfile.cuda starts FROM, on machines
# that cannot pull from any registry (this project's build machines). Not run by CI: only
# docker/build-cuda-image.sh needs them.
#
#   bash scripts/cuda-base-images.sh [--force] [/usr/local/cuda-13.0]
#
# Made from what this machine has: the Debian bookworm minbase root filesystem that
# scripts/podman-setup.sh caches, plus the machine's CUDA toolkit (nvcc, cudart, and the cuBLAS
# that scripts/cuda-toolkit-extras.sh copies in from the nvidia-cublas wheel):
#   devel   the whole toolkit in /usr/local/cuda-<major.minor>, /usr/local/cuda -> it, nvcc on PATH
#   runtime only the shared libraries an application links: libcudart, libcublas, libcublasLt
# tagged with the names Docker gives the official images (docker.io/nvidia/cuda:<v>-{devel,runtime}-<os>),
# so the SAME Dockerfile builds here and, elsewhere, on the real images pulled from Docker Hub.
# They are NOT the official images: the OS inside is Debian bookworm (not Ubuntu), there is
# no libcuda stub (ggml then builds with GGML_CUDA_NO_VMM) and the runtime stand-in carries only the
# three libraries above. The tag must name the toolkit's CUDA release (checked below) and match
# the defaults of Dockerfile.cuda (CUDA_VERSION, CUDA_OS).
#
# Idempotent: an image whose stamp (toolkit contents, local CAs, suite) matches is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=podman-setup.sh
source scripts/podman-setup.sh

CUDA_VERSION="${CUDA_VERSION:-$(sed -n 's/^ARG CUDA_VERSION=//p' docker/Dockerfile.cuda)}"
CUDA_OS="${CUDA_OS:-$(sed -n 's/^ARG CUDA_OS=//p' docker/Dockerfile.cuda)}"
force=""
[ "${1:-}" = "--force" ] && { force=1; shift; }
TOOLKIT="$(readlink -f "${1:-${CUDA_PATH:-/usr/local/cuda}}")"
DEVEL="docker.io/nvidia/cuda:${CUDA_VERSION}-devel-${CUDA_OS}"
RUNTIME="docker.io/nvidia/cuda:${CUDA_VERSION}-runtime-${CUDA_OS}"
RUNTIME_LIBS=(libcudart.so libcublas.so libcublasLt.so)

[ -x "$TOOLKIT/bin/nvcc" ] || die "no nvcc in $TOOLKIT (pass the toolkit folder)"
release="$("$TOOLKIT/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\),.*/\1/p')"
case "$CUDA_VERSION" in "$release".*) ;; *) die "toolkit $TOOLKIT is CUDA $release, the tag says $CUDA_VERSION";; esac
for lib in "${RUNTIME_LIBS[@]}"; do
  ls "$TOOLKIT"/lib64/"$lib".* >/dev/null 2>&1 || die "$lib missing from $TOOLKIT/lib64 (cuBLAS: bash scripts/cuda-toolkit-extras.sh $TOOLKIT)"
done
dir="cuda-$release"   # /usr/local/cuda-13.0, as in the official images

stamp="$({ echo "$CUDA_VERSION $CUDA_OS $SUITE"; find "$TOOLKIT/" -type f -printf '%P %s\n' | sort
  cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true; } | sha256sum | cut -c1-16)"

fresh() {  # fresh IMAGE: made here from this very toolkit
  [ -z "$force" ] && podman image exists "$1" 2>/dev/null &&
    [ "$(podman image inspect --format '{{index .Labels "org.svc.base-stamp"}}' "$1" 2>/dev/null)" = "$stamp" ]
}

# make_image KIND IMAGE: the minbase root filesystem plus the toolkit (all of it, or the runtime libraries).
make_image() {
  local kind="$1" image="$2" tarball stage lib
  tarball="$(ensure_rootfs)"
  stage="$(mktemp -d)"
  # shellcheck disable=SC2064
  trap "as_root rm -rf '$stage'" RETURN
  as_root tar -C "$stage" -xf "$tarball"
  as_root mkdir -p "$stage/usr/local/$dir"
  if [ "$kind" = devel ]; then
    as_root cp -a "$TOOLKIT/." "$stage/usr/local/$dir/"
  else
    as_root mkdir -p "$stage/usr/local/$dir/lib64"
    for lib in "${RUNTIME_LIBS[@]}"; do
      # the versioned files (libcudart.so.13 and whatever they point to), not the dev symlinks
      as_root cp -a "$TOOLKIT/lib64/$lib".* "$stage/usr/local/$dir/lib64/"
    done
  fi
  as_root ln -sfn "$dir" "$stage/usr/local/cuda"
  as_root ln -sfn "$dir" "$stage/usr/local/cuda-${release%%.*}"
  echo "/usr/local/cuda/lib64" | as_root tee "$stage/etc/ld.so.conf.d/000_cuda.conf" >/dev/null
  as_root chroot "$stage" /sbin/ldconfig
  local extra_ca=()
  add_local_cas "$stage" && extra_ca=(--change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt')
  local path=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  local devel_env=()
  [ "$kind" = devel ] && devel_env=(--change 'ENV LIBRARY_PATH=/usr/local/cuda/lib64/stubs')
  log "importing $image ($kind stand-in, CUDA $release from $TOOLKIT)"
  as_root tar -C "$stage" --numeric-owner -cf "$CACHE_DIR/cuda-$kind.tar" .
  as_root podman import \
    --change "ENV PATH=$path" \
    --change 'ENV LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64' \
    --change "ENV CUDA_VERSION=$CUDA_VERSION" \
    --change 'ENV NVIDIA_VISIBLE_DEVICES=all' \
    --change 'ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility' \
    --change "ENV NVIDIA_REQUIRE_CUDA=cuda>=$release" \
    --change 'CMD ["/bin/bash"]' \
    --change 'LABEL org.svc.local-base=true' \
    --change "LABEL org.svc.base-stamp=$stamp" \
    "${devel_env[@]}" "${extra_ca[@]}" \
    "$CACHE_DIR/cuda-$kind.tar" "$image" >&2
  as_root rm -f "$CACHE_DIR/cuda-$kind.tar"
}

install_pkgs
for kind in devel runtime; do
  image="$DEVEL"; [ "$kind" = runtime ] && image="$RUNTIME"
  if fresh "$image"; then log "$image present (stamp $stamp)"; continue; fi
  make_image "$kind" "$image"
done
podman run --rm "$DEVEL" nvcc --version | tail -1 >&2
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep "nvidia/cuda:$CUDA_VERSION" >&2 || true

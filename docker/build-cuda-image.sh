#!/usr/bin/env bash
# Builds the CUDA image (docker/Dockerfile.cuda) with podman on a machine without registry
# access: makes the local nvidia/cuda stand-ins first (scripts/cuda-base-images.sh), then
# builds the unchanged Dockerfile on them. Not part of CI: compiling llama.cpp's CUDA kernels
# takes over an hour for ONE architecture on 2 cores.
#
#   bash docker/build-cuda-image.sh                       # CUDA_ARCHS=90 (H100/H200), tag svc:cuda
#   CUDA_ARCHS="75;80;86;89;90" bash docker/build-cuda-image.sh   # the Dockerfile's default list
#
# Environment: CUDA_ARCHS (default 90), BUILD_JOBS (default 2), SVC_CUDA_IMAGE (tag, default
# localhost/svc:cuda), CUDA_PATH (toolkit for the stand-ins, default /usr/local/cuda).
# podman keeps every layer (--layers): a rebuild after a TypeScript change reuses the compiled
# addons; only changes to native/, scripts/build-native.mjs or the lockfile's cmake-js /
# node-addon-api versions recompile them. test/containers/cuda-image.e2e-spec.ts runs the result.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCHS="${CUDA_ARCHS:-90}"
JOBS="${BUILD_JOBS:-2}"
TAG="${SVC_CUDA_IMAGE:-localhost/svc:cuda}"

bash scripts/podman-setup.sh base >&2
bash scripts/cuda-base-images.sh "${CUDA_PATH:-/usr/local/cuda}" >&2
echo "[build-cuda-image] building $TAG for CUDA_ARCHS=$ARCHS with $JOBS jobs ($(date -u +%FT%TZ))" >&2
t0=$SECONDS
podman build --format docker --layers \
  -f docker/Dockerfile.cuda \
  --build-arg CUDA_ARCHS="$ARCHS" --build-arg BUILD_JOBS="$JOBS" \
  --label org.svc.cuda-archs="$ARCHS" \
  -t "$TAG" .
echo "[build-cuda-image] $TAG built in $(( (SECONDS - t0) / 60 )) min: $(podman image inspect --format '{{.Size}}' "$TAG") bytes" >&2

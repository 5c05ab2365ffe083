#!/usr/bin/env bash
# A compiler-only CUDA toolkit (nvcc + cudart, as on these build machines) lacks
# cuBLAS, which ggml-cuda needs. This copies cuBLAS headers and libraries from
# the nvidia-cublas Python wheel (pip download works against a local or public
# index) into the toolkit. Idempotent; needs write access to the toolkit.
#   scripts/cuda-toolkit-extras.sh [/usr/local/cuda]
set -euo pipefail
CUDA=${1:-${CUDA_PATH:-/usr/local/cuda}}
CUDA=$(readlink -f "$CUDA")
if [ -f "$CUDA/include/cublas_v2.h" ] && ls "$CUDA"/lib64/libcublas.so* >/dev/null 2>&1; then
  echo "cuBLAS already in $CUDA"; exit 0
fi
major=$("$CUDA/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --no-deps --only-binary=:all: -d "$tmp" "nvidia-cublas>=${major},<$((major + 1))" ||
  python3 -m pip download --no-deps --only-binary=:all: -d "$tmp" "nvidia-cublas-cu${major}"
(cd "$tmp" && python3 -m zipfile -e ./*.whl x)
root=$(dirname "$(find "$tmp/x" -name cublas_v2.h | head -1)")/..
cp "$root"/include/cublas*.h "$CUDA/include/"
for f in "$root"/lib/libcublas*.so.*; do cp "$f" "$CUDA/lib64/"; ln -sf "$(basename "$f")" "$CUDA/lib64/$(basename "$f" | sed 's/\.so\..*/.so/')"; done
echo "installed cuBLAS from $(ls "$tmp"/*.whl | xargs -n1 basename) into $CUDA"

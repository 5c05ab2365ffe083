#!/usr/bin/env bash
# On a bare NVIDIA machine, from a repo copy carrying .dev/ (bench/cuda/bundle.sh)
# and dist/: checks the CUDA addon (smoke test: greedy stories260K text equals
# llama.cpp's), the three dialects on the GPU, and runs the benchmark against
# llama-server built from the same tree. Writes logs and bench.json to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/svc-out}; mkdir -p "$OUT"
D=.dev
if ! command -v node >/dev/null || [[ "$(node -v)" != v20* ]]; then
  mkdir -p /tmp/nodebin && xz -dc $D/node.xz > /tmp/nodebin/node && chmod +x /tmp/nodebin/node
  export PATH=/tmp/nodebin:$PATH
fi
[ -d node_modules ] || tar -xJf $D/nm.tar.xz
tar -xJf $D/cuda.tar.xz
[ -d $D/llama-src ] || tar -xJf $D/llama-src.tar.xz -C $D
for lib in libcublas.so.13 libcudart.so.13; do
  dir=$(dirname "$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)")
  export LD_LIBRARY_PATH=$dir:${LD_LIBRARY_PATH:-}
done
export SVC_LLAMA_SRC=$PWD/$D/llama-src SVC_CACHE_DIR=/tmp/svc-cache SVC_MODELS_DIR=$PWD/$D/models SVC_NO_DOWNLOAD=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
node -v; nproc
echo "== smoke (cuda addon)"
timeout 120 node native/smoke.mjs --backend cuda --model "$SVC_MODELS_DIR/stories260K.gguf" 2>&1 | tee "$OUT/smoke.log" | tail -25
echo "== dialects on the GPU"
timeout 180 node bench/cuda/dialects.mjs 2>&1 | tee "$OUT/dialects.log"
echo "== benchmark"
T=${THREADS:-8}
timeout "${BENCH_TIMEOUT:-330}" node bench/run.mjs --models "${MODELS:-stories,qwen05b}" --reps "${REPS:-2}" --threads "$T" --out "$OUT/bench.json" \
  --svc-cmd "node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel} -backend cuda" \
  --llama-server build/native/cuda/ref/llama-server --llama-extra '-ngl 999' 2>&1 | tee "$OUT/bench.log" | tail -30

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
node -v; nproc; lscpu | grep -m1 'Model name' || true
# PHASES picks what runs (default: all of them, in this order):
#   smoke     native/smoke.mjs on the CUDA addon
#   dialects  bench/cuda/dialects.mjs on the GPU
#   sampling  bench/sampling.mjs on the GPU: sampling on the CPU against sampling in the graph, engine alone
#   resident  bench/resident.mjs on the GPU: other sequences' cells with and without attention windows
#             (llama.cpp patch 0006), engine alone, stories260K and qwen2-0.5b
#   gpu       benchmark vs llama-server, -ngl 999 (BENCH_ARGS: more options, BENCH_TAG: file-name suffix)
#   cpu       the same benchmark with no GPU visible (CUDA_VISIBLE_DEVICES=, both on the CPU
#             code of the same build): a quiet many-core host for CPU figures, CPU_THREADS threads
#   stream    svc alone on the GPU with streaming chains off (SVC_STREAM_MS=-1, session 3's
#             chains), to set beside the gpu phase's svc figures (streaming chains on)
#   repeat    the stories260K GPU benchmark REPEAT more times (the Xid 13 hunt)
#   stress    bench/stress-bursts.mjs on the GPU, svc then llama-server: 300 sequential sampled
#             streams, then 10 bursts of 8 (the load that crashed svc with CUDA graphs on
#             multi-token steps, patch 0007); STRESS_MODELS (default stories); STRESS_MATRIX=1
#             adds svc with graphs on every step, svc with graphs on every step that calls no
#             cuBLAS (GGML_CUDA_GRAPHS_NO_CUBLAS), svc with graphs on every step and few-column
#             products on ggml's vector kernel (GGML_CUDA_MMVF_SMALL_BATCH), and llama-server -kvu
#             with graphs on every step (native/patches/README.md, patch 0007)
#   (gpu)     SVC_GRAPH_ENV="--svc-env GGML_CUDA_GRAPHS_NO_CUBLAS=1" benchmarks svc under that rule
#   variants  one server alone on the GPU with other flags, VARIANT_MODELS (default qwen05b) once
#             each: LLAMA_VARIANT (more llama-server flags, e.g. -bs), SVC_VARIANT (more svc flags)
PHASES=${PHASES:-smoke dialects gpu}
# llama-server as upstream ships it: CUDA graphs on multi-token steps too (patch 0007 keeps them
# to one-token steps in svc's addon and, sharing the tree, in llama-server unless this is set).
# LLAMA_GRAPH_ENV= (empty) runs it under svc's rule instead.
LLAMA_GRAPH_ENV=${LLAMA_GRAPH_ENV---llama-env GGML_CUDA_GRAPHS_MULTI_TOKEN=1}
T=${THREADS:-8}
has() { [[ " $PHASES " == *" $1 "* ]]; }
if has smoke; then
  echo "== smoke (cuda addon)"
  timeout 120 node native/smoke.mjs --backend cuda --model "$SVC_MODELS_DIR/stories260K.gguf" 2>&1 | tee "$OUT/smoke.log" | tail -25
  if [ -n "${STRESS_MATRIX:-}" ]; then
    echo "== smoke with few-column products on the vector kernel (GGML_CUDA_MMVF_SMALL_BATCH=1, graphs on every step)"
    GGML_CUDA_MMVF_SMALL_BATCH=1 GGML_CUDA_GRAPHS_MULTI_TOKEN=1 timeout 120 node native/smoke.mjs --backend cuda \
      --model "$SVC_MODELS_DIR/stories260K.gguf" 2>&1 | tee "$OUT/smoke-mmvf.log" | tail -6
  fi
fi
if has dialects; then
  echo "== dialects on the GPU"
  timeout 180 node bench/cuda/dialects.mjs 2>&1 | tee "$OUT/dialects.log"
fi
if has sampling; then
  echo "== sampling on the CPU vs in the graph (engine alone, qwen2-0.5b)"
  timeout "${SAMPLING_TIMEOUT:-150}" node bench/sampling.mjs --backend cuda --threads "$T" --reps "${REPS:-2}" --out "$OUT/sampling.json" 2>&1 | tee "$OUT/sampling.log" | tail -4
fi
if has resident; then
  echo "== other sequences' cells, with and without attention windows (engine alone)"
  for m in stories260K qwen2-0.5b; do
    mp="$SVC_MODELS_DIR/$m.gguf"; [ "$m" = qwen2-0.5b ] && mp=$(node test/fixtures/models.mjs qwen2-0.5b | tail -1)
    timeout "${RESIDENT_TIMEOUT:-120}" node bench/resident.mjs --backend cuda --threads "$T" --model "$mp" --reps "${REPS:-3}" --out "$OUT/resident-$m.json" 2>&1 | tee "$OUT/resident-$m.log" | tail -7
  done
fi
if has cpu; then
  echo "== benchmark, CPU only (${CPU_THREADS:-2} threads)"
  CUDA_VISIBLE_DEVICES= timeout "${CPU_TIMEOUT:-240}" node bench/run.mjs --models "${CPU_MODELS:-stories,qwen05b}" --reps "${REPS:-2}" --threads "${CPU_THREADS:-2}" --out "$OUT/bench-cpu.json" \
    --svc-cmd "node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel} -ctx-size {slot_ctx} -backend cuda -gpu-layers 0" \
    --llama-server build/native/cuda/ref/llama-server --llama-extra '-ngl 0' 2>&1 | tee "$OUT/bench-cpu.log" | tail -12
fi
if has gpu; then
  echo "== benchmark, GPU"
  # BENCH_ARGS: more bench/run.mjs options (e.g. --keep-alive); BENCH_TAG names the output files apart.
  timeout "${BENCH_TIMEOUT:-330}" node bench/run.mjs --models "${MODELS:-stories,qwen05b}" --reps "${REPS:-2}" --threads "$T" --out "$OUT/bench${BENCH_TAG:-}.json" ${BENCH_ARGS:-} \
    --svc-cmd "node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel} -ctx-size {slot_ctx} -backend cuda" \
    --llama-server build/native/cuda/ref/llama-server --llama-extra '-ngl 999' $LLAMA_GRAPH_ENV ${SVC_GRAPH_ENV:-} 2>&1 | tee "$OUT/bench${BENCH_TAG:-}.log" | tail -30
fi
if has stream; then
  echo "== benchmark, GPU, svc with streaming chains off"
  timeout "${BENCH_TIMEOUT:-330}" node bench/run.mjs --only svc --models "${MODELS:-stories,qwen05b}" --reps "${REPS:-2}" --threads "$T" --out "$OUT/bench-nostream.json" \
    --svc-cmd "env SVC_STREAM_MS=-1 node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel} -ctx-size {slot_ctx} -backend cuda" 2>&1 | tee "$OUT/bench-nostream.log" | tail -12
fi
if has stress; then
  echo "== stress: bursts of concurrent sampled streams on the GPU"
  SVC_GPU="node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel} -ctx-size {slot_ctx} -backend cuda"
  stress() { timeout "${STRESS_TIMEOUT:-200}" node bench/stress-bursts.mjs --models "${STRESS_MODELS:-stories}" --threads "$T" \
    --svc-cmd "$SVC_GPU" --llama-server build/native/cuda/ref/llama-server "$@" 2>&1 | tee -a "$OUT/stress.log"; }
  # svc as shipped (patch 0007: graphs for one-token steps), llama-server with ggml's own rule.
  stress --llama-extra '-ngl 999' $LLAMA_GRAPH_ENV
  if [ -n "${STRESS_MATRIX:-}" ]; then
    # Which setups crash with graphs on multi-token steps: svc (expected to, as in session 18),
    # and llama-server with one unified KV cache like svc's (-kvu): does upstream crash too?
    stress --only svc --label graphs-all --svc-env GGML_CUDA_GRAPHS_MULTI_TOKEN=1
    # The hypothesis of patch 0007's GGML_CUDA_GRAPHS_NO_CUBLAS: only steps that call cuBLAS crash.
    stress --only svc --label no-cublas --svc-env GGML_CUDA_GRAPHS_NO_CUBLAS=1
    # ...and the fix it would suggest: graphs on every step, few-column products off cuBLAS.
    stress --only svc --label mmvf --svc-env GGML_CUDA_GRAPHS_MULTI_TOKEN=1 --svc-env GGML_CUDA_MMVF_SMALL_BATCH=1
    stress --only llama --label kvu-graphs-all --llama-extra '-ngl 999 -kvu' --llama-env GGML_CUDA_GRAPHS_MULTI_TOKEN=1
  fi
  tar -czf "$OUT/stress-logs.tgz" /tmp/svc-stress-*.log 2>/dev/null
fi
if has repeat; then
  for i in $(seq "${REPEAT:-2}"); do
    echo "== repeat $i: stories260K on the GPU"
    timeout 120 node bench/run.mjs --models stories --reps 1 --threads "$T" --no-write \
      --svc-cmd "node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel} -ctx-size {slot_ctx} -backend cuda" \
      --llama-server build/native/cuda/ref/llama-server --llama-extra '-ngl 999' > "$OUT/repeat-$i.log" 2>&1
    echo "rc=$? $(tail -5 "$OUT/repeat-$i.log" | tr '\n' '|')"
  done
  dmesg 2>/dev/null | grep -i xid | tail -5 || true
fi
if has variants; then
  if [ -n "${LLAMA_VARIANT:-}" ]; then
    echo "== llama-server alone on the GPU with $LLAMA_VARIANT"
    timeout "${VARIANT_TIMEOUT:-150}" node bench/run.mjs --only llama --models "${VARIANT_MODELS:-qwen05b}" --reps 1 --threads "$T" --out "$OUT/bench-llama-variant.json" ${BENCH_ARGS:-} \
      --llama-server build/native/cuda/ref/llama-server --llama-extra "-ngl 999 $LLAMA_VARIANT" 2>&1 | tee "$OUT/bench-llama-variant.log" | tail -6
  fi
  if [ -n "${SVC_VARIANT:-}" ]; then
    echo "== svc alone on the GPU with $SVC_VARIANT"
    timeout "${VARIANT_TIMEOUT:-150}" node bench/run.mjs --only svc --models "${VARIANT_MODELS:-qwen05b}" --reps 1 --threads "$T" --out "$OUT/bench-svc-variant.json" ${BENCH_ARGS:-} \
      --svc-cmd "node bin/svc.js -m {model} -addr {host}:{port} -threads {threads} -concurrency {parallel} -ctx-size {slot_ctx} -backend cuda $SVC_VARIANT" 2>&1 | tee "$OUT/bench-svc-variant.log" | tail -6
  fi
fi
# One archive: what comes back from the machine is limited in file count.
tar -czf "$OUT/server-logs.tgz" /tmp/svc-bench-* 2>/dev/null; du -sh "$OUT"

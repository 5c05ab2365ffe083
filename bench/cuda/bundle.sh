#!/usr/bin/env bash
# Packs what a bare GPU machine needs to run bench/cuda/device-check.sh from a
# copy of this repo: the CUDA addon and llama-server built here
# (node scripts/build-native.mjs --backend cuda --reference-tools ...), a Node
# binary, production node_modules, and gguf-py + the qwen2 vocabulary for the
# synthetic 0.5B model. Output: .dev/ (keep it git-ignored; it travels as a carried path).
set -euo pipefail
cd "$(dirname "$0")/../.."
D=.dev
rm -rf "$D" && mkdir -p "$D/llama-src/models" "$D/models"
SRC=${SVC_LLAMA_SRC:-$HOME/.cache/svc/src/llama.cpp}
test -f build/native/cuda/svc_engine.node || { echo "build the CUDA addon first" >&2; exit 1; }
test -f build/native/cuda/ref/llama-server || { echo "build with --reference-tools first" >&2; exit 1; }
# One archive: the addon and llama-server share most bytes (the same ggml-cuda),
# which a large xz dictionary stores once.
tar -cf - build/native/cuda/svc_engine.node build/native/cuda/stamp.json build/native/cuda/ref/llama-server |
  xz -T2 --lzma2=preset=6,dict=256MiB > "$D/cuda.tar.xz"
xz -T2 -6 -c "$(readlink -f "$(command -v node)")" > "$D/node.xz"
tmp=$(mktemp -d)
cp package.json package-lock.json "$tmp/"
(cd "$tmp" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund >/dev/null &&
  rm -rf node_modules/typescript node_modules/cmake-js node_modules/node-addon-api &&
  tar -cf - node_modules | xz -T2 -6 > nm.tar.xz)
mv "$tmp/nm.tar.xz" "$D/" && rm -rf "$tmp"
cp -r "$SRC/gguf-py" "$D/llama-src/"
cp "$SRC/models/ggml-vocab-qwen2.gguf" "$D/llama-src/models/"
tar -cf - -C "$D" llama-src | xz -T2 -6 > "$D/llama-src.tar.xz" && rm -rf "$D/llama-src"
# ../shared does not travel with the repo: the real test model goes along.
cp "${SVC_MODELS_DIR:-../shared/models}/stories260K.gguf" "$D/models/"
du -sh "$D"/*

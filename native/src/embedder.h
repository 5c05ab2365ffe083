// NativeEmbedder: a llama_context in embeddings mode over loaded weights, whose
// embed() pools one vector per input and normalizes it (L2), on the libuv pool.
// Kept apart from the generation context: an encoder has no KV cache to share,
// and its batch must hold whole inputs (non-causal attention sees all tokens).
#pragma once

#include <napi.h>

#include "ggml-cpu.h"
#include "llama.h"

#include <atomic>
#include <memory>

struct ModelState;

struct EmbedderState {
  std::shared_ptr<ModelState> model;  // keeps the llama_model alive
  llama_context * ctx = nullptr;
  llama_batch batch{};
  int32_t nBatch = 0, nSeqMax = 0, nEmbd = 0;
  enum llama_pooling_type pooling = LLAMA_POOLING_TYPE_UNSPECIFIED;
  // One embed() at a time: a second call is refused rather than racing llama.cpp.
  std::atomic<bool> busy{false};
  // The CPU compute threads, kept and asleep between calls: without one attached, ggml starts
  // and joins a pool for every graph (measured: 14.6 ms a one-input call with 2 threads, 0.13 ms
  // with 1).
  ggml_threadpool * pool = nullptr;
  ~EmbedderState() {
    if (batch.token) llama_batch_free(batch);
    if (ctx) llama_free(ctx);
    if (pool) ggml_threadpool_free(pool);
  }
};

class Embedder : public Napi::ObjectWrap<Embedder> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit Embedder(const Napi::CallbackInfo & info);

 private:
  Napi::Value Embed(const Napi::CallbackInfo & info);
  void Dispose(const Napi::CallbackInfo & info);

  std::shared_ptr<EmbedderState> st_;
};

// model.createEmbedder(opts)
Napi::Value createEmbedder(const Napi::CallbackInfo & info, const std::shared_ptr<ModelState> & model);
// model.rerankInputs(query, documents) → Promise<Int32Array[]>: each pair as a cross-encoder reads it
Napi::Value rerankInputs(const Napi::CallbackInfo & info, const std::shared_ptr<ModelState> & model);

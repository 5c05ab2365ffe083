// NativeContext: llama_context with a unified KV cache shared by n_seq_max
// sequences, a persistent batch, and step() = decode + sample on a worker.
#pragma once

#include <napi.h>

#include "engine_thread.h"
#include "ggml-cpu.h"
#include "hugepages.h"
#include "llama.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

struct ModelState;
struct common_sampler;
void freeCommonSampler(common_sampler * s);  // sampler.cpp

// Backend sampling: the clone of a request's sampler whose chain runs in the
// compute graph for one sequence (llama_set_sampler). A chain set up for the graph
// skips those samplers when applied on the CPU, so it never samples there: the next
// request on the sequence with the same configuration takes it over (its state
// copied in), any other drops it for a fresh clone (graph_sampling.cpp).
struct SeqSampler {
  uint64_t owner = 0, version = 0;  // the SamplerState it mirrors (id, version)
  std::string config;               // its chain's configuration (SamplerState::config)
  common_sampler * clone = nullptr;
  uint64_t lastUsed = 0;            // ContextState::graphStep it last sampled at
};

struct ContextState {
  std::shared_ptr<ModelState> model;  // keeps the llama_model alive
  llama_context * ctx = nullptr;
  llama_batch batch{};                // sized n_batch, reused by every step
  int32_t nBatch = 0, nCtx = 0, nSeqMax = 0, nVocab = 0;
  // True while a worker (step / state read / state write) owns ctx; JS-thread
  // operations refuse to run then instead of racing llama.cpp.
  std::atomic<bool> busy{false};
  // Set from JS (new work, a cancel) to end a chained step early.
  std::atomic<bool> yield{false};
  std::vector<uint8_t> lastLogits;    // logits flags of the last decoded batch (for logits())
  HugePageResult hugePages;           // KV cache and compute buffers on 2 MiB pages (hugepages.h)
  bool backendSampling = false;       // samplers of this context may run in the compute graph
  std::vector<SeqSampler> seqSamplers;  // per sequence id; engine thread only (graph_sampling.cpp)
  int32_t graphSamplerSlots = 32;     // bound clones at most
  uint64_t graphStep = 0;
  // The CPU compute threads, attached as llama-server's common library does (a
  // second pool when n_threads_batch differs). Without OpenMP (the CPU build)
  // they are ggml's own threads, and svc puts them to sleep whenever the engine
  // thread runs out of work: between graphs they otherwise poll for the next one
  // (ggml's default poll: a tenth of a second or more; libgomp: several ms),
  // holding CPUs that the JavaScript thread and the clients need once a
  // request's tokens are out.
  ggml_threadpool * pool = nullptr;
  ggml_threadpool * poolBatch = nullptr;
  std::unique_ptr<EngineThread> thread;  // runs every job on ctx (see engine_thread.h)
  ~ContextState() {
    thread.reset();  // joins: nothing may run on ctx past this point
    if (batch.token) llama_batch_free(batch);
    if (ctx) llama_free(ctx);
    for (auto & s : seqSamplers) freeCommonSampler(s.clone);  // after the context that used them
    if (poolBatch) ggml_threadpool_free(poolBatch);
    if (pool) ggml_threadpool_free(pool);
  }
  // Engine thread, once no job is queued. (No-ops with OpenMP.)
  void pauseCompute() {
    if (pool) ggml_threadpool_pause(pool);
    if (poolBatch) ggml_threadpool_pause(poolBatch);
  }
  // Engine thread, as a decode begins: the pool its graphs will use (llama.cpp
  // takes the batch pool for more than one token) wakes while llama_decode
  // prepares the batch and graph, not at the first graph's start.
  void resumeCompute(bool batched) {
    ggml_threadpool * p = batched && poolBatch ? poolBatch : pool;
    if (p) ggml_threadpool_resume(p);
  }
};

// Runs on the context's engine thread; releases the busy flag on the JS
// thread once done.
class BusyWorker : public EngineJob {
 public:
  BusyWorker(Napi::Env env, const char *, std::shared_ptr<ContextState> cs) : EngineJob(env), cs_(std::move(cs)) {
    cs_->busy = true;
  }
  Napi::Promise Queue(Napi::Env env) {
    auto p = Promise();
    cs_->thread->Submit(env, this);
    return p;
  }

 protected:
  void Finally() override { cs_->busy = false; }
  std::shared_ptr<ContextState> cs_;
};

class Context : public Napi::ObjectWrap<Context> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit Context(const Napi::CallbackInfo & info);

 private:
  std::shared_ptr<ContextState> state(Napi::Env env, bool idle = true) const;
  Napi::Value CreateSampler(const Napi::CallbackInfo & info);
  Napi::Value Step(const Napi::CallbackInfo & info);
  Napi::Value RequestYield(const Napi::CallbackInfo & info);
  Napi::Value Logits(const Napi::CallbackInfo & info);
  Napi::Value SeqRemove(const Napi::CallbackInfo & info);
  Napi::Value SeqCopy(const Napi::CallbackInfo & info);
  Napi::Value SeqKeep(const Napi::CallbackInfo & info);
  Napi::Value SeqPosMin(const Napi::CallbackInfo & info);
  Napi::Value SeqPosMax(const Napi::CallbackInfo & info);
  Napi::Value StateSeqGet(const Napi::CallbackInfo & info);
  Napi::Value StateSeqSet(const Napi::CallbackInfo & info);
  Napi::Value Clear(const Napi::CallbackInfo & info);
  Napi::Value EvalMedia(const Napi::CallbackInfo & info);  // vision.cpp
  void Dispose(const Napi::CallbackInfo & info);

  std::shared_ptr<ContextState> st_;
};

// model.createContext(opts)
Napi::Value createContext(const Napi::CallbackInfo & info, const std::shared_ptr<ModelState> & model);

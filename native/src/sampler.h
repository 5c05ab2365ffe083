// NativeSampler: a common_sampler built from NativeSamplerOptions.
#pragma once

#include <napi.h>

#include "sampling.h"  // llama.cpp common/sampling.h

#include <atomic>
#include <memory>
#include <string>

struct ModelState;

struct SamplerState {
  std::shared_ptr<ModelState> model;  // common_sampler references the vocab
  common_sampler * smpl = nullptr;    // always sampled on the CPU: never given to llama_set_sampler
  std::atomic<bool> inStep{false};    // a step() worker is using it
  // Its chain may also run in the compute graph (backend sampling: created by a
  // context with it on, and no grammar). The context then samples with a clone
  // bound to the sequence (SeqSampler); id + version tell whether that clone
  // still mirrors this sampler (every accept and reset makes a new version).
  bool backend = false;
  uint64_t id = 0;
  uint64_t version = 0;
  // The chain's configuration (every parameter, not its state): a clone bound to a
  // sequence takes over another sampler's state when their configurations match,
  // which spares setting a new chain up for the graph (llama_set_sampler).
  std::string config;
  ~SamplerState() { common_sampler_free(smpl); }
};

class Sampler : public Napi::ObjectWrap<Sampler> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit Sampler(const Napi::CallbackInfo & info);
  std::shared_ptr<SamplerState> state(Napi::Env env) const;

 private:
  Napi::Value AcceptPrompt(const Napi::CallbackInfo & info);
  void Dispose(const Napi::CallbackInfo & info);
  void Reset(const Napi::CallbackInfo & info);
  std::shared_ptr<SamplerState> st_;
};

// context.createSampler(opts)
// backend: the context samples in its compute graph where the chain allows (see SamplerState).
Napi::Value createSampler(Napi::Env env, const std::shared_ptr<ModelState> & model, const Napi::Value & opts, int32_t n_ctx,
                          bool backend);
std::shared_ptr<SamplerState> unwrapSampler(const Napi::Value & v);

// NativeSampler: a common_sampler built from NativeSamplerOptions.
#pragma once

#include <napi.h>

#include "sampling.h"  // llama.cpp common/sampling.h

#include <atomic>
#include <memory>

struct ModelState;

struct SamplerState {
  std::shared_ptr<ModelState> model;  // common_sampler references the vocab
  common_sampler * smpl = nullptr;
  std::atomic<bool> inStep{false};    // a step() worker is using it
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
Napi::Value createSampler(Napi::Env env, const std::shared_ptr<ModelState> & model, const Napi::Value & opts, int32_t n_ctx);
std::shared_ptr<SamplerState> unwrapSampler(const Napi::Value & v);

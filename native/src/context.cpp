#include "context.h"

#include "hugepages.h"
#include "model.h"
#include "sampler.h"
#include "svc.h"
#include "svc_log.h"
#include "workers.h"

#include <cstring>

// ---- createContext ----------------------------------------------------------

namespace {
class CreateContextWorker : public PromiseWorker {
 public:
  CreateContextWorker(Napi::Env env, std::shared_ptr<ModelState> model, llama_context_params p, bool hugePages,
                      bool backendSampling, int32_t graphSamplerSlots)
      : PromiseWorker(env, "svc_engine.createContext"), model_(std::move(model)), p_(p), hugePages_(hugePages),
        backendSampling_(backendSampling), graphSamplerSlots_(graphSamplerSlots) {}

  void Execute() override {
    auto st = std::make_shared<ContextState>();
    st->model = model_;
    std::vector<MapRegion> before;
    if (hugePages_) before = readSelfMaps();
    LogCapture cap;
    st->ctx = llama_init_from_model(model_->model, p_);
    if (!st->ctx) {
      throw std::runtime_error("failed to create context" + (cap.text().empty() ? "" : ": " + cap.text()));
    }
    // The KV cache and compute buffers are cleared as they are created: already
    // faulted in on small pages, so they are collapsed rather than only advised.
    if (hugePages_) st->hugePages = adviseNewMappings(before, 4u << 20, true);
    st->nCtx = (int32_t) llama_n_ctx(st->ctx);
    st->nBatch = (int32_t) llama_n_batch(st->ctx);
    st->nSeqMax = (int32_t) llama_n_seq_max(st->ctx);
    st->nVocab = llama_vocab_n_tokens(model_->vocab);
    st->batch = llama_batch_init(st->nBatch, 0, 1);
    st->backendSampling = backendSampling_;
    st->seqSamplers.resize(st->nSeqMax);
    st->graphSamplerSlots = graphSamplerSlots_;
    // Created paused: the threads sleep until the first graph.
    auto pausedPool = [](int32_t n) {
      auto tpp = ggml_threadpool_params_default(n);
      tpp.paused = true;
      ggml_threadpool * p = ggml_threadpool_new(&tpp);
      if (!p) throw std::runtime_error("failed to create the compute threads");
      return p;
    };
    st->pool = pausedPool(p_.n_threads);
    if (p_.n_threads_batch != p_.n_threads) st->poolBatch = pausedPool(p_.n_threads_batch);
    llama_attach_threadpool(st->ctx, st->pool, st->poolBatch);
    st_ = std::move(st);
  }
  Napi::Value Result(Napi::Env env) override {
    ContextState * cs = st_.get();  // outlives its thread: ~ContextState joins it first
    st_->thread = std::make_unique<EngineThread>(env, [cs] { cs->pauseCompute(); });
    auto ext = Napi::External<std::shared_ptr<ContextState>>::New(env, &st_);
    return addonData(env).context.New({ext});
  }

 private:
  std::shared_ptr<ModelState> model_;
  llama_context_params p_;
  bool hugePages_, backendSampling_;
  int32_t graphSamplerSlots_;
  std::shared_ptr<ContextState> st_;
};
}  // namespace

Napi::Value createContext(const Napi::CallbackInfo & info, const std::shared_ptr<ModelState> & model) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) throwType(env, "createContext(opts): opts must be an object");
  auto o = info[0].As<Napi::Object>();
  auto p = llama_context_default_params();
  auto req = [&](const char * k) {
    if (!hasOpt(o, k)) throwType(env, std::string("createContext: '") + k + "' is required");
    double v = optNumber(o, k, 0);
    if (v < 1 || v > 1e9) throwRange(env, std::string("createContext: '") + k + "' must be >= 1");
    return (uint32_t) v;
  };
  p.n_ctx = req("nCtx");
  p.n_batch = req("nBatch");
  p.n_ubatch = req("nUbatch");
  p.n_seq_max = req("nSeqMax");
  p.n_threads = (int32_t) req("nThreads");
  p.n_threads_batch = (int32_t) req("nThreadsBatch");
  std::string fa = optString(o, "flashAttn", "auto");
  if (fa == "auto") p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
  else if (fa == "on") p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
  else if (fa == "off") p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  else throwType(env, "createContext: flashAttn must be 'auto', 'on' or 'off'");
  p.kv_unified = true;  // nCtx is the total cell budget shared by all sequences
  p.no_perf = true;
  const double slots = optNumber(o, "graphSamplerSlots", 32);
  if (!(slots >= 1 && slots <= 256)) throwRange(env, "createContext: 'graphSamplerSlots' must be 1..256");
  auto * w = new CreateContextWorker(env, model, p, optBool(o, "hugePages", false), optBool(o, "backendSampling", false),
                                     (int32_t) slots);
  auto promise = w->Promise();
  w->Queue();
  return promise;
}

// ---- Context ----------------------------------------------------------------

Napi::Function Context::Define(Napi::Env env) {
  return DefineClass(env, "NativeContext", {
    InstanceMethod<&Context::CreateSampler>("createSampler"),
    InstanceMethod<&Context::Step>("step"),
    InstanceMethod<&Context::RequestYield>("requestYield"),
    InstanceMethod<&Context::Logits>("logits"),
    InstanceMethod<&Context::SeqRemove>("seqRemove"),
    InstanceMethod<&Context::SeqCopy>("seqCopy"),
    InstanceMethod<&Context::SeqKeep>("seqKeep"),
    InstanceMethod<&Context::SeqPosMin>("seqPosMin"),
    InstanceMethod<&Context::SeqPosMax>("seqPosMax"),
    InstanceMethod<&Context::StateSeqGet>("stateSeqGet"),
    InstanceMethod<&Context::StateSeqSet>("stateSeqSet"),
    InstanceMethod<&Context::Clear>("clear"),
    InstanceMethod<&Context::EvalMedia>("evalMedia"),
    InstanceMethod<&Context::Dispose>("dispose"),
  });
}

Context::Context(const Napi::CallbackInfo & info) : Napi::ObjectWrap<Context>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsExternal()) throwType(env, "NativeContext is created by model.createContext()");
  st_ = *info[0].As<Napi::External<std::shared_ptr<ContextState>>>().Data();
  Value().TypeTag(&kTagContext);
  auto self = Value();
  self.DefineProperty(Napi::PropertyDescriptor::Value("nCtx", Napi::Number::New(env, st_->nCtx), napi_enumerable));
  self.DefineProperty(Napi::PropertyDescriptor::Value("nSeqMax", Napi::Number::New(env, st_->nSeqMax), napi_enumerable));
  self.DefineProperty(Napi::PropertyDescriptor::Value("nBatch", Napi::Number::New(env, st_->nBatch), napi_enumerable));
  self.DefineProperty(Napi::PropertyDescriptor::Value("hugePages", hugePageInfo(env, st_->hugePages), napi_enumerable));
  self.DefineProperty(Napi::PropertyDescriptor::Value("backendSampling", Napi::Boolean::New(env, st_->backendSampling), napi_enumerable));
}

std::shared_ptr<ContextState> Context::state(Napi::Env env, bool idle) const {
  if (!st_) throwError(env, "context is disposed");
  if (idle && st_->busy) throwError(env, "context is busy: a step() or state operation is in flight");
  return st_;
}

Napi::Value Context::CreateSampler(const Napi::CallbackInfo & info) {
  auto st = state(info.Env(), false);
  return createSampler(info.Env(), st->model, info.Length() > 0 ? info[0] : info.Env().Undefined(), st->nCtx,
                       st->backendSampling);
}

Napi::Value Context::RequestYield(const Napi::CallbackInfo & info) {
  if (st_) st_->yield = true;  // read by a chained step between its decodes
  return info.Env().Undefined();
}

Napi::Value Context::Logits(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  auto st = state(env);
  if (info.Length() < 1 || !info[0].IsNumber()) throwType(env, "logits(index): index must be a number");
  int32_t i = info[0].As<Napi::Number>().Int32Value();
  if (i < 0 || (size_t) i >= st->lastLogits.size() || !st->lastLogits[i]) {
    throwRange(env, "logits(" + std::to_string(i) + "): no logits for that entry of the last step");
  }
  const float * lg = llama_get_logits_ith(st->ctx, i);
  if (!lg) throwRange(env, "logits(" + std::to_string(i) + "): not available");
  auto out = Napi::Float32Array::New(env, st->nVocab);
  std::memcpy(out.Data(), lg, sizeof(float) * st->nVocab);
  return out;
}

static int32_t argInt(const Napi::CallbackInfo & info, size_t i, const char * what) {
  if (info.Length() <= i || !info[i].IsNumber()) throwType(info.Env(), std::string(what) + " must be a number");
  return info[i].As<Napi::Number>().Int32Value();
}

static llama_seq_id argSeq(const Napi::CallbackInfo & info, size_t i, const ContextState & st) {
  int32_t s = argInt(info, i, "seq");
  if (s < -1 || s >= st.nSeqMax) throwRange(info.Env(), "seq " + std::to_string(s) + " out of range");
  return s;
}

Napi::Value Context::SeqRemove(const Napi::CallbackInfo & info) {
  auto st = state(info.Env());
  llama_seq_id s = argSeq(info, 0, *st);
  bool ok = llama_memory_seq_rm(llama_get_memory(st->ctx), s, argInt(info, 1, "p0"), argInt(info, 2, "p1"));
  return Napi::Boolean::New(info.Env(), ok);
}

Napi::Value Context::SeqCopy(const Napi::CallbackInfo & info) {
  auto st = state(info.Env());
  llama_seq_id src = argSeq(info, 0, *st), dst = argSeq(info, 1, *st);
  if (src < 0 || dst < 0) throwRange(info.Env(), "seqCopy: src and dst must be >= 0");
  llama_memory_seq_cp(llama_get_memory(st->ctx), src, dst, argInt(info, 2, "p0"), argInt(info, 3, "p1"));
  return info.Env().Undefined();
}

Napi::Value Context::SeqKeep(const Napi::CallbackInfo & info) {
  auto st = state(info.Env());
  llama_seq_id s = argSeq(info, 0, *st);
  if (s < 0) throwRange(info.Env(), "seqKeep: seq must be >= 0");
  llama_memory_seq_keep(llama_get_memory(st->ctx), s);
  return info.Env().Undefined();
}

Napi::Value Context::SeqPosMin(const Napi::CallbackInfo & info) {
  auto st = state(info.Env());
  llama_seq_id s = argSeq(info, 0, *st);
  if (s < 0) throwRange(info.Env(), "seq " + std::to_string(s) + " out of range");  // llama.cpp asserts (aborts) on -1 here
  return Napi::Number::New(info.Env(), llama_memory_seq_pos_min(llama_get_memory(st->ctx), s));
}

Napi::Value Context::SeqPosMax(const Napi::CallbackInfo & info) {
  auto st = state(info.Env());
  llama_seq_id s = argSeq(info, 0, *st);
  if (s < 0) throwRange(info.Env(), "seq " + std::to_string(s) + " out of range");  // llama.cpp asserts (aborts) on -1 here
  return Napi::Number::New(info.Env(), llama_memory_seq_pos_max(llama_get_memory(st->ctx), s));
}

Napi::Value Context::Clear(const Napi::CallbackInfo & info) {
  auto st = state(info.Env());
  llama_memory_clear(llama_get_memory(st->ctx), true);
  return info.Env().Undefined();
}

void Context::Dispose(const Napi::CallbackInfo &) {
  // Deferred free: an in-flight worker holds its own reference and the
  // llama_context is released when it completes.
  st_.reset();
}

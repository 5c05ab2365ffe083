#include "embedder.h"

#include "common.h"
#include "model.h"
#include "svc.h"
#include "svc_log.h"
#include "workers.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

static const char * poolingName(enum llama_pooling_type p) {
  switch (p) {
    case LLAMA_POOLING_TYPE_MEAN: return "mean";
    case LLAMA_POOLING_TYPE_CLS: return "cls";
    case LLAMA_POOLING_TYPE_LAST: return "last";
    case LLAMA_POOLING_TYPE_RANK: return "rank";
    default: return "none";
  }
}

// ---- createEmbedder ---------------------------------------------------------

namespace {
class CreateEmbedderWorker : public PromiseWorker {
 public:
  CreateEmbedderWorker(Napi::Env env, std::shared_ptr<ModelState> model, llama_context_params p)
      : PromiseWorker(env, "svc_engine.createEmbedder"), model_(std::move(model)), p_(p) {}

  void Execute() override {
    auto st = std::make_shared<EmbedderState>();
    st->model = model_;
    LogCapture cap;
    st->ctx = llama_init_from_model(model_->model, p_);
    // A model that pools nothing itself (a decoder, or an encoder converted without
    // pooling) is mean-pooled, as sentence-transformers does by default.
    if (st->ctx && llama_pooling_type(st->ctx) == LLAMA_POOLING_TYPE_NONE) {
      llama_free(st->ctx);
      p_.pooling_type = LLAMA_POOLING_TYPE_MEAN;
      st->ctx = llama_init_from_model(model_->model, p_);
    }
    if (!st->ctx) {
      throw std::runtime_error("failed to create the embedding context" + (cap.text().empty() ? "" : ": " + cap.text()));
    }
    auto tpp = ggml_threadpool_params_default(p_.n_threads);
    tpp.paused = true;
    st->pool = ggml_threadpool_new(&tpp);
    if (!st->pool) throw std::runtime_error("failed to create the compute threads");
    llama_attach_threadpool(st->ctx, st->pool, nullptr);
    st->pooling = llama_pooling_type(st->ctx);
    st->nBatch = (int32_t) llama_n_batch(st->ctx);
    st->nSeqMax = (int32_t) llama_n_seq_max(st->ctx);
    st->nEmbd = llama_model_n_embd_out(model_->model);
    st->batch = llama_batch_init(st->nBatch, 0, 1);
    st_ = std::move(st);
  }
  Napi::Value Result(Napi::Env env) override {
    auto ext = Napi::External<std::shared_ptr<EmbedderState>>::New(env, &st_);
    return addonData(env).embedder.New({ext});
  }

 private:
  std::shared_ptr<ModelState> model_;
  llama_context_params p_;
  std::shared_ptr<EmbedderState> st_;
};
}  // namespace

Napi::Value createEmbedder(const Napi::CallbackInfo & info, const std::shared_ptr<ModelState> & model) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) throwType(env, "createEmbedder(opts): opts must be an object");
  auto o = info[0].As<Napi::Object>();
  auto req = [&](const char * k, double max) {
    if (!hasOpt(o, k)) throwType(env, std::string("createEmbedder: '") + k + "' is required");
    double v = optNumber(o, k, 0);
    if (!(v >= 1 && v <= max)) throwRange(env, std::string("createEmbedder: '") + k + "' is out of range");
    return (uint32_t) v;
  };
  auto p = llama_context_default_params();
  p.embeddings = true;
  // One input must fit one micro-batch: the encoder attends over all of its tokens at once.
  p.n_ctx = req("nCtx", 1 << 20);
  p.n_batch = p.n_ubatch = p.n_ctx;
  p.n_seq_max = req("nSeqMax", 256);  // llama.cpp's LLAMA_MAX_SEQ
  p.n_threads = p.n_threads_batch = (int32_t) req("nThreads", 1024);
  p.kv_unified = true;
  p.no_perf = true;
  auto * w = new CreateEmbedderWorker(env, model, p);
  auto promise = w->Promise();
  w->Queue();
  return promise;
}

// ---- embed --------------------------------------------------------------------

// Tokens one encoder batch packs (a longer input goes alone).
static constexpr int32_t kPackTokens = 512;

namespace {
class EmbedWorker : public PromiseWorker {
 public:
  EmbedWorker(Napi::Env env, std::shared_ptr<EmbedderState> st, std::vector<std::vector<llama_token>> inputs)
      : PromiseWorker(env, "svc_engine.embed"), st_(std::move(st)), inputs_(std::move(inputs)) {
    st_->busy = true;
  }

  void Execute() override {
    EmbedderState & s = *st_;
    out_.resize(inputs_.size());
    // Awake for this call only: between calls the threads sleep rather than poll.
    ggml_threadpool_resume(s.pool);
    struct Pause {
      ggml_threadpool * p;
      ~Pause() { ggml_threadpool_pause(p); }
    } pause{s.pool};
    size_t next = 0;
    // Inputs are packed into batches, each input its own sequence, up to kPackTokens (or the
    // longest input): the encoder computes attention over the whole batch, masked per sequence,
    // so packing 64 inputs into an 8k batch was 2.2x slower per input than one at a time.
    size_t longest = 0;
    for (const auto & in : inputs_) longest = std::max(longest, in.size());
    const int32_t pack = std::min<int32_t>(s.nBatch, std::max<int32_t>(kPackTokens, (int32_t) longest));
    while (next < inputs_.size()) {
      common_batch_clear(s.batch);
      const size_t first = next;
      while (next < inputs_.size() && (int32_t) (next - first) < s.nSeqMax &&
             (next == first || s.batch.n_tokens + (int32_t) inputs_[next].size() <= pack)) {
        const auto & toks = inputs_[next];
        const llama_seq_id seq = (llama_seq_id) (next - first);
        for (size_t i = 0; i < toks.size(); i++) common_batch_add(s.batch, toks[i], (llama_pos) i, {seq}, true);
        next++;
      }
      if (llama_memory_t mem = llama_get_memory(s.ctx)) llama_memory_clear(mem, true);
      LogCapture cap;
      const int32_t rc = llama_decode(s.ctx, s.batch);
      if (rc != 0) {
        throw std::runtime_error("embedding batch failed (llama_decode " + std::to_string(rc) + ")" +
                                 (cap.text().empty() ? "" : ": " + cap.text()));
      }
      for (size_t i = first; i < next; i++) {
        const float * e = llama_get_embeddings_seq(s.ctx, (llama_seq_id) (i - first));
        if (!e) throw std::runtime_error("the model gave no pooled embedding");
        if (s.pooling == LLAMA_POOLING_TYPE_RANK) {
          out_[i].assign(e, e + 1);  // a cross-encoder's relevance logit, as llama-server reads it
          continue;
        }
        out_[i].resize(s.nEmbd);
        common_embd_normalize(e, out_[i].data(), s.nEmbd, 2);
      }
    }
  }
  Napi::Value Result(Napi::Env env) override {
    auto arr = Napi::Array::New(env, out_.size());
    for (size_t i = 0; i < out_.size(); i++) {
      auto v = Napi::Float32Array::New(env, out_[i].size());
      std::memcpy(v.Data(), out_[i].data(), out_[i].size() * sizeof(float));
      arr.Set((uint32_t) i, v);
    }
    return arr;
  }

 protected:
  void Finally() override { st_->busy = false; }

 private:
  std::shared_ptr<EmbedderState> st_;
  std::vector<std::vector<llama_token>> inputs_;
  std::vector<std::vector<float>> out_;
};
}  // namespace

// ---- rerankInputs --------------------------------------------------------------

namespace {
// One (query, document) pair as llama-server's rerank feeds a cross-encoder: the model's
// "rerank" template when it has one, else BOS query EOS SEP document EOS as the vocabulary adds them.
std::vector<llama_token> rerankPair(const ModelState & m, const std::string & query, const std::string & doc) {
  const llama_vocab * v = m.vocab;
  if (const char * tmpl = llama_model_chat_template(m.model, "rerank")) {
    // One pass over the template: replacing {query} then {document} in the result also replaced
    // every "{document}" the query holds, and a query of many of them multiplied the document.
    std::string prompt;
    const std::string t = tmpl;
    for (size_t at = 0; at < t.size();) {
      if (t.compare(at, 7, "{query}") == 0) {
        prompt += query;
        at += 7;
      } else if (t.compare(at, 10, "{document}") == 0) {
        prompt += doc;
        at += 10;
      } else {
        prompt += t[at++];
      }
    }
    return common_tokenize(v, prompt, false, true);
  }
  llama_token eos = llama_vocab_eos(v);
  if (eos == LLAMA_TOKEN_NULL) eos = llama_vocab_sep(v);
  std::vector<llama_token> out;
  if (llama_vocab_get_add_bos(v)) out.push_back(llama_vocab_bos(v));
  auto q = common_tokenize(v, query, false, false);
  out.insert(out.end(), q.begin(), q.end());
  if (llama_vocab_get_add_eos(v)) out.push_back(eos);
  if (llama_vocab_get_add_sep(v)) out.push_back(llama_vocab_sep(v));
  auto d = common_tokenize(v, doc, false, false);
  out.insert(out.end(), d.begin(), d.end());
  if (llama_vocab_get_add_eos(v)) out.push_back(eos);
  return out;
}

class RerankInputsWorker : public PromiseWorker {
 public:
  RerankInputsWorker(Napi::Env env, std::shared_ptr<ModelState> st, std::string query, std::vector<std::string> docs)
      : PromiseWorker(env, "svc_engine.rerankInputs"), st_(std::move(st)), query_(std::move(query)), docs_(std::move(docs)) {}
  void Execute() override {
    for (const auto & d : docs_) out_.push_back(rerankPair(*st_, query_, d));
  }
  Napi::Value Result(Napi::Env env) override {
    auto arr = Napi::Array::New(env, out_.size());
    for (size_t i = 0; i < out_.size(); i++) arr.Set((uint32_t) i, toInt32Array(env, out_[i]));
    return arr;
  }

 private:
  std::shared_ptr<ModelState> st_;
  std::string query_;
  std::vector<std::string> docs_;
  std::vector<std::vector<llama_token>> out_;
};
}  // namespace

Napi::Value rerankInputs(const Napi::CallbackInfo & info, const std::shared_ptr<ModelState> & model) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsString() || !info[1].IsArray()) throwType(env, "rerankInputs(query, documents): a string and an array of strings");
  auto arr = info[1].As<Napi::Array>();
  std::vector<std::string> docs;
  for (uint32_t i = 0; i < arr.Length(); i++) {
    Napi::Value d = arr.Get(i);
    if (!d.IsString()) throwType(env, "rerankInputs: documents must be strings");
    docs.push_back(d.As<Napi::String>().Utf8Value());
  }
  auto * w = new RerankInputsWorker(env, model, info[0].As<Napi::String>().Utf8Value(), std::move(docs));
  auto promise = w->Promise();
  w->Queue();
  return promise;
}

// ---- Embedder -------------------------------------------------------------------

Napi::Function Embedder::Define(Napi::Env env) {
  return DefineClass(env, "NativeEmbedder", {
    InstanceMethod<&Embedder::Embed>("embed"),
    InstanceMethod<&Embedder::Dispose>("dispose"),
  });
}

Embedder::Embedder(const Napi::CallbackInfo & info) : Napi::ObjectWrap<Embedder>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsExternal()) throwType(env, "NativeEmbedder is created by model.createEmbedder()");
  st_ = *info[0].As<Napi::External<std::shared_ptr<EmbedderState>>>().Data();
  auto o = Value();
  o.DefineProperty(Napi::PropertyDescriptor::Value("nEmbd", Napi::Number::New(env, st_->nEmbd), napi_enumerable));
  o.DefineProperty(Napi::PropertyDescriptor::Value("nCtx", Napi::Number::New(env, st_->nBatch), napi_enumerable));
  o.DefineProperty(Napi::PropertyDescriptor::Value("nSeqMax", Napi::Number::New(env, st_->nSeqMax), napi_enumerable));
  o.DefineProperty(Napi::PropertyDescriptor::Value("pooling", Napi::String::New(env, poolingName(st_->pooling)), napi_enumerable));
}

// embed(inputs: Int32Array[]) → Promise<Float32Array[]>, unit-length vectors in input order
// (a cross-encoder's: one raw relevance score each).
Napi::Value Embedder::Embed(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  if (!st_) throwError(env, "embedder is disposed");
  if (st_->busy) throwError(env, "embedder is busy");
  if (info.Length() < 1 || !info[0].IsArray()) throwType(env, "embed(inputs): inputs must be an array of Int32Array");
  auto arr = info[0].As<Napi::Array>();
  const int32_t nVocab = llama_vocab_n_tokens(st_->model->vocab);
  std::vector<std::vector<llama_token>> inputs(arr.Length());
  for (uint32_t i = 0; i < arr.Length(); i++) {
    Napi::Value v = arr.Get(i);
    if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
      throwType(env, "embed(inputs): inputs must be an array of Int32Array");
    }
    auto a = v.As<Napi::Int32Array>();
    if (a.ElementLength() == 0) throwRange(env, "embed: input " + std::to_string(i) + " has no tokens");
    if ((int64_t) a.ElementLength() > st_->nBatch) {
      throwRange(env, "embed: input " + std::to_string(i) + " has " + std::to_string(a.ElementLength()) +
                          " tokens; the embedding context holds " + std::to_string(st_->nBatch));
    }
    inputs[i].assign(a.Data(), a.Data() + a.ElementLength());
    for (auto t : inputs[i]) {
      if (t < 0 || t >= nVocab) throwRange(env, "token id " + std::to_string(t) + " out of range");
    }
  }
  auto * w = new EmbedWorker(env, st_, std::move(inputs));
  auto promise = w->Promise();
  w->Queue();
  return promise;
}

void Embedder::Dispose(const Napi::CallbackInfo & info) {
  if (st_ && st_->busy) throwError(info.Env(), "embedder is busy");
  st_.reset();  // a running worker holds its own reference
}

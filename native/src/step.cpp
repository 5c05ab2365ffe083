// Context::step: decode + sample (chained, optionally streaming) on the
// context's engine thread while ContextState::busy is held.
#include "context.h"
#include "graph_sampling.h"
#include "model.h"
#include "sampler.h"
#include "svc.h"
#include "workers.h"

#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>
#include <optional>

namespace {

struct SampleReq {
  int32_t index;
  std::shared_ptr<SamplerState> smpl;
  int32_t top;
  int32_t budget;   // tokens this sequence may still take (chained steps stop at 0)
  bool eogStops;    // an end-of-generation token ends the chain
  std::vector<int32_t> score;  // tokens whose log-probabilities are wanted whatever their rank (systemone)
  common_sampler * graph = nullptr;  // the sequence's clone sampled in the compute graph (graph_sampling.h)

  bool wantsRaw() const { return top > 0 || !score.empty(); }
};

struct Logprob {
  float logprob;
  std::vector<std::pair<llama_token, float>> top;
  std::vector<float> scored;  // log-softmax of the raw logits of SampleReq::score, in its order
};

// Steps a chain has run that JS has not taken yet. The engine thread fills it;
// JS drains it, from a streaming delivery or from the step's result, whichever
// runs first: either way every step reaches JS once and in order.
struct Outbox {
  std::mutex mu;
  std::vector<llama_token> tokens;  // steps × sample requests
  std::vector<std::optional<Logprob>> logprobs;
  int32_t steps = 0;
  int64_t decodeUs = 0, sampleUs = 0;
};

// { tokens, logprobs, steps, decodeUs, sampleUs } of what the outbox holds, emptying it.
Napi::Object drain(Napi::Env env, Outbox & box) {
  std::vector<llama_token> toks;
  std::vector<std::optional<Logprob>> lps;
  int32_t steps;
  int64_t decodeUs, sampleUs;
  {
    std::lock_guard<std::mutex> lk(box.mu);
    toks.swap(box.tokens);
    lps.swap(box.logprobs);
    steps = box.steps;
    decodeUs = box.decodeUs;
    sampleUs = box.sampleUs;
    box.steps = 0;
    box.decodeUs = box.sampleUs = 0;
  }
  auto res = Napi::Object::New(env);
  res.Set("steps", steps);
  auto ta = Napi::Int32Array::New(env, toks.size());
  for (size_t i = 0; i < toks.size(); i++) ta[i] = toks[i];
  res.Set("tokens", ta);
  auto arr = Napi::Array::New(env, lps.size());
  for (size_t i = 0; i < lps.size(); i++) {
    if (!lps[i]) {
      arr.Set((uint32_t) i, env.Null());
      continue;
    }
    auto o = Napi::Object::New(env);
    o.Set("logprob", lps[i]->logprob);
    auto top = Napi::Array::New(env, lps[i]->top.size());
    for (size_t j = 0; j < lps[i]->top.size(); j++) {
      auto pair = Napi::Array::New(env, 2);
      pair.Set(0u, lps[i]->top[j].first);
      pair.Set(1u, lps[i]->top[j].second);
      top.Set((uint32_t) j, pair);
    }
    o.Set("top", top);
    if (!lps[i]->scored.empty()) {
      auto sc = Napi::Float32Array::New(env, lps[i]->scored.size());
      for (size_t j = 0; j < lps[i]->scored.size(); j++) sc[j] = lps[i]->scored[j];
      o.Set("scored", sc);
    }
    arr.Set((uint32_t) i, o);
  }
  res.Set("logprobs", arr);
  res.Set("decodeUs", (double) decodeUs);
  res.Set("sampleUs", (double) sampleUs);
  return res;
}


class StepWorker : public BusyWorker {
 public:
  StepWorker(Napi::Env env, std::shared_ptr<ContextState> cs, std::vector<int32_t> tok, std::vector<int32_t> pos,
             std::vector<int32_t> seq, std::vector<uint8_t> lg, std::vector<SampleReq> reqs, int32_t maxSteps,
             int64_t maxUs, Napi::Function onTokens, int64_t streamUs)
      : BusyWorker(env, "svc_engine.step", std::move(cs)), tok_(std::move(tok)), pos_(std::move(pos)),
        seq_(std::move(seq)), lg_(std::move(lg)), reqs_(std::move(reqs)), maxSteps_(maxSteps), maxUs_(maxUs),
        streamUs_(streamUs), box_(std::make_shared<Outbox>()) {
    for (auto & r : reqs_) r.smpl->inStep = true;
    cs_->yield = false;
    if (!onTokens.IsEmpty()) tokens_ = Napi::ThreadSafeFunction::New(env, onTokens, "svc_engine.tokens", 0, 1);
  }

  // One decode + sample; then, for a batch of decoding sequences only, keep
  // decoding the tokens just sampled (up to maxSteps) without a round trip to
  // JS, until a budget runs out, an end token comes, JS asks to yield, or the
  // chain has run maxUs (streams should not arrive in long bursts).
  void Execute() override {
    cs_->resumeCompute(tok_.size() > 1);
    bindSamplers();
    const int64_t start = ggml_time_us();
    int64_t lastPost = start;
    for (int32_t step = 0; step < maxSteps_; step++) {
      const int status = decodeOnce();
      if (step == 0) status_ = status;
      if (status != 0) break;  // a later step that finds no KV room just ends the chain
      steps_++;
      sampleAll();
      if (sampleFailed_) break;  // a -1 must not be decoded: JS fails that sequence
      const int64_t now = ggml_time_us();
      if (!chainable() || cs_->yield.load() || now - start >= maxUs_) break;
      // Streaming: hand the steps so far to JS while the chain goes on.
      if (tokens_ && now - lastPost >= streamUs_) {
        lastPost = now;
        post();
        tokens_.NonBlockingCall([box = box_](Napi::Env env, Napi::Function fn) {
          if (env == nullptr) return;
          Napi::HandleScope scope(env);
          auto d = drain(env, *box);
          if (d.Get("steps").As<Napi::Number>().Int32Value() == 0) return;
          try {
            fn.Call({d});
          } catch (const Napi::Error &) {
            // The scheduler's handler catches its own errors; nothing to add here.
          }
        });
      }
      const size_t base = out_.size() - reqs_.size();
      bool stop = false;
      for (size_t i = 0; i < reqs_.size(); i++) {
        auto & r = reqs_[i];
        const llama_token t = out_[base + i];
        if (--r.budget <= 0 || (r.eogStops && llama_vocab_is_eog(cs_->model->vocab, t))) stop = true;
        tok_[r.index] = t;
        pos_[r.index] += 1;
      }
      if (stop) break;
    }
    post();
  }

  // What JS has not taken yet (all of it when nothing streamed), plus the chain's status.
  Napi::Value Result(Napi::Env env) override {
    auto res = drain(env, *box_);
    res.Set("status", status_);
    res.Set("idleUs", (double) idleUs());
    return res;
  }

 protected:
  void Finally() override {
    if (tokens_) tokens_.Release();
    for (auto & r : reqs_) r.smpl->inStep = false;
    // Remember which entries have logits, for Context::logits(): not those sampled
    // in the graph, whose raw logits llama.cpp does not copy out.
    cs_->lastLogits = status_ == 0 ? lg_ : std::vector<uint8_t>();
    for (auto & r : reqs_) {
      if (r.graph && (size_t) r.index < cs_->lastLogits.size()) cs_->lastLogits[r.index] = 0;
    }
    BusyWorker::Finally();
  }

 private:
  // Moves the steps not handed over yet into the outbox.
  void post() {
    std::lock_guard<std::mutex> lk(box_->mu);
    box_->tokens.insert(box_->tokens.end(), out_.begin() + posted_, out_.end());
    for (size_t i = posted_; i < logprobs_.size(); i++) box_->logprobs.push_back(std::move(logprobs_[i]));
    posted_ = out_.size();
    box_->steps += steps_ - postedSteps_;
    postedSteps_ = steps_;
    box_->decodeUs += decodeUs_ - postedDecodeUs_;
    box_->sampleUs += sampleUs_ - postedSampleUs_;
    postedDecodeUs_ = decodeUs_;
    postedSampleUs_ = sampleUs_;
  }

  int decodeOnce() {
    llama_batch & b = cs_->batch;
    b.n_tokens = (int32_t) tok_.size();
    for (size_t i = 0; i < tok_.size(); i++) {
      b.token[i] = tok_[i];
      b.pos[i] = pos_[i];
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = seq_[i];
      b.logits[i] = lg_[i] ? 1 : 0;
    }
    const int64_t t0 = ggml_time_us();
    const int status = llama_decode(cs_->ctx, b);
    decodeUs_ += ggml_time_us() - t0;
    return status;
  }

  // The sample requests whose sequences sample in the compute graph get their clone.
  void bindSamplers() {
    if (!cs_->backendSampling) return;
    std::vector<GraphSample> g;
    g.reserve(reqs_.size());
    for (auto & r : reqs_) g.push_back({r.index, r.smpl.get(), r.wantsRaw()});
    bindGraphSamplers(*cs_, seq_, lg_, g);
    for (size_t i = 0; i < reqs_.size(); i++) reqs_[i].graph = g[i].graph;
  }

  void sampleAll() {
    const int64_t t0 = ggml_time_us();
    for (auto & r : reqs_) {
      if (r.wantsRaw()) {
        logprobs_.push_back(topLogprobs(r.index, r.top, r.score));
      } else {
        logprobs_.push_back(std::nullopt);
      }
      llama_token t;
      try {
        if (r.graph) {
          // Sampled in the graph; the request's own sampler follows along (its
          // penalty history), so a later clone or a CPU fallback starts from here.
          t = common_sampler_sample(r.graph, cs_->ctx, r.index);
          common_sampler_accept(r.graph, t, true);
        } else {
          t = common_sampler_sample(r.smpl->smpl, cs_->ctx, r.index);
        }
        common_sampler_accept(r.smpl->smpl, t, true);
      } catch (const std::exception &) {
        // A grammar that allows no token here (unsatisfiable, or a token id past the
        // vocabulary): this sequence gets -1 and fails alone; the others in the step go on.
        out_.push_back(-1);
        sampleFailed_ = true;
        continue;
      }
      // Every accept is a new state: a clone elsewhere that missed it is stale.
      r.smpl->version++;
      if (r.graph) cs_->seqSamplers[seq_[r.index]].version = r.smpl->version;
      if (logprobs_.back()) logprobs_.back()->logprob = sampledLogprob(r.index, t);
      out_.push_back(t);
    }
    sampleUs_ += ggml_time_us() - t0;
  }

  // Chaining needs every batch entry to be a sampled, decoding sequence.
  bool chainable() {
    if (chainChecked_) return chainOk_;
    chainChecked_ = true;
    chainOk_ = maxSteps_ > 1 && reqs_.size() == tok_.size();
    for (auto & r : reqs_) chainOk_ = chainOk_ && r.budget > 0;
    return chainOk_;
  }

  // log-softmax of the raw logits (before any sampler touches them).
  float logSumExp(const float * lg) {
    const int n = cs_->nVocab;
    float mx = *std::max_element(lg, lg + n);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += std::exp((double) lg[i] - mx);
    return mx + (float) std::log(sum);
  }
  Logprob topLogprobs(int32_t idx, int32_t k, const std::vector<int32_t> & score) {
    const float * lg = llama_get_logits_ith(cs_->ctx, idx);
    const int n = cs_->nVocab;
    k = std::min(k, n);
    float lse = logSumExp(lg);
    Logprob r{0.0f, {}, {}};
    if (k > 0) {
      std::vector<int32_t> ids(n);
      std::iota(ids.begin(), ids.end(), 0);
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                        [lg](int32_t a, int32_t b) { return lg[a] > lg[b] || (lg[a] == lg[b] && a < b); });
      for (int i = 0; i < k; i++) r.top.emplace_back(ids[i], lg[ids[i]] - lse);
    }
    r.scored.reserve(score.size());
    for (int32_t t : score) r.scored.push_back(lg[t] - lse);
    lse_ = lse;
    return r;
  }
  float sampledLogprob(int32_t idx, llama_token t) { return llama_get_logits_ith(cs_->ctx, idx)[t] - lse_; }

  std::vector<int32_t> tok_, pos_, seq_;
  std::vector<uint8_t> lg_;
  std::vector<SampleReq> reqs_;
  int32_t maxSteps_ = 1, steps_ = 0;
  int64_t maxUs_ = 0;
  bool chainChecked_ = false, chainOk_ = false, sampleFailed_ = false;
  int status_ = -1;
  float lse_ = 0;
  std::vector<llama_token> out_;
  std::vector<std::optional<Logprob>> logprobs_;
  int64_t decodeUs_ = 0, sampleUs_ = 0;
  int64_t streamUs_ = 0;
  std::shared_ptr<Outbox> box_;
  Napi::ThreadSafeFunction tokens_;  // empty unless the caller streams
  size_t posted_ = 0;
  int32_t postedSteps_ = 0;
  int64_t postedDecodeUs_ = 0, postedSampleUs_ = 0;
};

template <typename T, napi_typedarray_type TT>
std::vector<T> copyTyped(Napi::Env env, const Napi::Object & batch, const char * k) {
  Napi::Value v = batch.Get(k);
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != TT) {
    throwType(env, std::string("batch.") + k + " has the wrong type");
  }
  auto a = v.As<Napi::TypedArrayOf<T>>();
  return std::vector<T>(a.Data(), a.Data() + a.ElementLength());
}

}  // namespace

Napi::Value Context::Step(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  auto st = state(env);
  if (info.Length() < 2 || !info[0].IsObject() || !info[1].IsArray()) throwType(env, "step(batch, samples)");
  auto b = info[0].As<Napi::Object>();
  // Copy on the JS thread: the caller may reuse its arrays right away.
  auto tok = copyTyped<int32_t, napi_int32_array>(env, b, "tokens");
  auto pos = copyTyped<int32_t, napi_int32_array>(env, b, "pos");
  auto seq = copyTyped<int32_t, napi_int32_array>(env, b, "seq");
  auto lg = copyTyped<uint8_t, napi_uint8_array>(env, b, "logits");
  const size_t n = tok.size();
  if (n == 0) throwRange(env, "step: empty batch");
  if (pos.size() != n || seq.size() != n || lg.size() != n) throwRange(env, "step: batch arrays differ in length");
  if ((int32_t) n > st->nBatch) {
    throwRange(env, "step: batch of " + std::to_string(n) + " tokens exceeds nBatch " + std::to_string(st->nBatch));
  }
  for (size_t i = 0; i < n; i++) {
    if (tok[i] < 0 || tok[i] >= st->nVocab) throwRange(env, "step: token id " + std::to_string(tok[i]) + " out of range");
    if (seq[i] < 0 || seq[i] >= st->nSeqMax) throwRange(env, "step: seq " + std::to_string(seq[i]) + " out of range");
  }
  auto arr = info[1].As<Napi::Array>();
  std::vector<SampleReq> reqs;
  for (uint32_t i = 0; i < arr.Length(); i++) {
    Napi::Value rv = arr.Get(i);
    if (!rv.IsObject()) throwType(env, "step: sample requests must be objects");
    auto r = rv.As<Napi::Object>();
    int32_t idx = (int32_t) optNumber(r, "index", -1);
    if (idx < 0 || (size_t) idx >= n || !lg[idx]) {
      throwRange(env, "step: sample index " + std::to_string(idx) + " is not a batch entry with logits = 1");
    }
    auto smpl = unwrapSampler(r.Get("sampler"));
    if (smpl->model != st->model) throwError(env, "step: sampler belongs to another model");
    if (smpl->inStep) throwError(env, "step: sampler is in use by another step() in flight");
    // One sampler state per request: sampling it twice in one step would advance it twice.
    for (const auto & q : reqs) {
      if (q.smpl == smpl) throwError(env, "step: sample request " + std::to_string(i) + " reuses the sampler of an earlier one");
    }
    std::vector<int32_t> score;
    Napi::Value sv = r.Get("scoreTokens");
    if (!sv.IsUndefined() && !sv.IsNull()) {
      if (!sv.IsTypedArray() || sv.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
        throwType(env, "step: scoreTokens must be an Int32Array");
      }
      auto a = sv.As<Napi::Int32Array>();
      score.assign(a.Data(), a.Data() + a.ElementLength());
      for (int32_t t : score) {
        if (t < 0 || t >= st->nVocab) throwRange(env, "step: score token id " + std::to_string(t) + " out of range");
      }
    }
    reqs.push_back({idx, std::move(smpl), std::max(0, (int32_t) optNumber(r, "topLogprobs", 0)),
                    (int32_t) optNumber(r, "budget", 1), optBool(r, "stopOnEog", true), std::move(score)});
  }
  int32_t maxSteps = 1;
  double maxMs = 1e9, streamMs = 0;
  Napi::Function onTokens;
  if (info.Length() > 2 && info[2].IsObject()) {
    auto o = info[2].As<Napi::Object>();
    maxSteps = (int32_t) optNumber(o, "maxSteps", 1);
    maxMs = optNumber(o, "maxMs", maxMs);
    streamMs = optNumber(o, "streamMs", 0);
    if (maxSteps < 1 || maxSteps > 1024) throwRange(env, "step: maxSteps must be 1..1024");
    if (!(maxMs >= 0)) throwRange(env, "step: maxMs must be >= 0");
    if (!(streamMs >= 0)) throwRange(env, "step: streamMs must be >= 0");
    Napi::Value f = o.Get("onTokens");
    if (f.IsFunction()) onTokens = f.As<Napi::Function>();
    else if (!f.IsUndefined() && !f.IsNull()) throwType(env, "step: onTokens must be a function");
  }
  auto * w = new StepWorker(env, st, std::move(tok), std::move(pos), std::move(seq), std::move(lg), std::move(reqs), maxSteps,
                            (int64_t) std::min(maxMs * 1000.0, 1e15), onTokens, (int64_t) std::min(streamMs * 1000.0, 1e15));
  return w->Queue(env);
}

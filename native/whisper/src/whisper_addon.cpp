// svc_whisper.node: whisper.cpp behind a small Node API. One model holds one
// whisper_state, reused by every transcription; the JS side runs them one at a
// time per model (libs/speech), so the state is never shared between threads.
#include <napi.h>

#include "audio_decode.h"
#include "whisper.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

// Set on the loading thread when whisper.cpp found no tensors in the file ("an empty model for
// testing"): a header without weights, or a download cut short, which then answered every
// request with nothing.
thread_local bool loadedNoTensors = false;

// whisper.cpp (and its ggml) log to stderr unless told otherwise: the server keeps its own log.
void quiet(enum ggml_log_level, const char * text, void *) {
  if (text && std::strstr(text, "no tensors loaded")) loadedNoTensors = true;
}

// The legacy header's hyperparameters, checked before whisper.cpp reads them: it sizes tensors
// from them and asserts (aborting the process) on a type or a size it cannot make, as with
// another ggml file (whisper.cpp's voice-activity model) or a damaged header.
std::string headerProblem(const std::string & path) {
  std::FILE * f = std::fopen(path.c_str(), "rb");
  if (!f) return "cannot be opened";
  int32_t h[12] = {0};
  const size_t got = std::fread(h, sizeof(int32_t), 12, f);
  std::fclose(f);
  if (got < 12 || (uint32_t) h[0] != 0x67676d6c) return "is not a whisper model (no ggml header)";
  const int32_t nVocab = h[1], audioCtx = h[2], audioState = h[3], audioHead = h[4], audioLayer = h[5];
  const int32_t textCtx = h[6], textState = h[7], textHead = h[8], textLayer = h[9], nMels = h[10], ftype = h[11];
  const auto within = [](int32_t v, int32_t lo, int32_t hi) { return v >= lo && v <= hi; };
  if (!within(nVocab, 1, 1 << 20) || !within(audioCtx, 1, 1 << 16) || !within(textCtx, 1, 1 << 16) || !within(audioState, 1, 1 << 14) ||
      !within(textState, 1, 1 << 14) || !within(audioHead, 1, 1024) || !within(textHead, 1, 1024) || !within(audioLayer, 1, 1024) ||
      !within(textLayer, 1, 1024) || !within(nMels, 1, 1024) || audioState % audioHead != 0 || textState % textHead != 0) {
    return "is not a whisper model (its header's sizes are not a whisper model's)";
  }
  // The types ggml maps (ggml_ftype_to_ggml_type asserts, aborting, on any other: it cannot be asked).
  static const enum ggml_ftype known[] = {
    GGML_FTYPE_ALL_F32, GGML_FTYPE_MOSTLY_F16, GGML_FTYPE_MOSTLY_BF16, GGML_FTYPE_MOSTLY_Q4_0, GGML_FTYPE_MOSTLY_Q4_1,
    GGML_FTYPE_MOSTLY_Q1_0, GGML_FTYPE_MOSTLY_Q5_0, GGML_FTYPE_MOSTLY_Q5_1, GGML_FTYPE_MOSTLY_Q8_0, GGML_FTYPE_MOSTLY_MXFP4,
    GGML_FTYPE_MOSTLY_NVFP4, GGML_FTYPE_MOSTLY_Q2_K, GGML_FTYPE_MOSTLY_Q3_K, GGML_FTYPE_MOSTLY_Q4_K, GGML_FTYPE_MOSTLY_Q5_K,
    GGML_FTYPE_MOSTLY_Q6_K, GGML_FTYPE_MOSTLY_IQ2_XXS, GGML_FTYPE_MOSTLY_IQ2_XS, GGML_FTYPE_MOSTLY_IQ3_XXS, GGML_FTYPE_MOSTLY_IQ1_S,
    GGML_FTYPE_MOSTLY_IQ1_M, GGML_FTYPE_MOSTLY_IQ4_NL, GGML_FTYPE_MOSTLY_IQ4_XS, GGML_FTYPE_MOSTLY_IQ3_S, GGML_FTYPE_MOSTLY_IQ2_S,
  };
  bool typed = false;
  for (auto k : known) typed = typed || (ftype >= 0 && ftype % GGML_QNT_VERSION_FACTOR == (int32_t) k);
  if (!typed) return "is not a whisper model (unknown weight type " + std::to_string(ftype) + ")";
  return "";
}

struct Model {
  whisper_context * ctx = nullptr;
  whisper_state * state = nullptr;
  std::mutex mu;  // held by a transcription; dispose waits for it
  ~Model() {
    if (state) whisper_free_state(state);
    if (ctx) whisper_free(ctx);
  }
};

struct Token {
  int id;
  std::string text;
  float p, plog;
  bool special;
};

struct Segment {
  int64_t t0, t1;  // centiseconds, as whisper.cpp counts them
  std::string text;
  float noSpeech;
  std::vector<Token> tokens;
};

// whisper.cpp refuses input shorter than its FFT window (rc -3); silence pads a blip to this.
constexpr size_t MIN_SAMPLES = WHISPER_SAMPLE_RATE / 10;

struct Options {
  std::string language;  // "" = detect
  bool translate = false;
  std::string prompt;
  int threads = 1;
  double maxSeconds = 3600;
};

std::string optString(const Napi::Object & o, const char * k) {
  Napi::Value v = o.Get(k);
  return v.IsString() ? v.As<Napi::String>().Utf8Value() : std::string();
}

class LoadWorker : public Napi::AsyncWorker {
 public:
  LoadWorker(Napi::Env env, std::string path) : Napi::AsyncWorker(env, "svc_whisper.load"), path_(std::move(path)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    auto m = std::make_shared<Model>();
    whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu = false;
    const std::string problem = headerProblem(path_);
    if (!problem.empty()) return SetError(path_ + " " + problem);
    loadedNoTensors = false;
    m->ctx = whisper_init_from_file_with_params_no_state(path_.c_str(), cp);
    if (!m->ctx) return SetError("whisper.cpp could not load " + path_ + " (not a whisper ggml model, or damaged)");
    if (loadedNoTensors) {
      whisper_free(m->ctx);
      m->ctx = nullptr;
      return SetError(path_ + " holds no weights (a header only, or a download cut short)");
    }
    // An all-f32 model would abort the process at its first convolution (1.9.1's im2col wants f16 kernels).
    if (whisper_model_ftype(m->ctx) == 0) return SetError(path_ + " is an all-f32 whisper model, which whisper.cpp 1.9.1 cannot run: use an f16 or quantized one");
    m->state = whisper_init_state(m->ctx);
    if (!m->state) return SetError("whisper.cpp could not allocate its state for " + path_);
    model_ = m;
  }
  void OnOK() override;
  void OnError(const Napi::Error & e) override { deferred_.Reject(e.Value()); }

 private:
  std::string path_;
  Napi::Promise::Deferred deferred_;
  std::shared_ptr<Model> model_;
};

class TranscribeWorker : public Napi::AsyncWorker {
 public:
  TranscribeWorker(Napi::Env env, std::shared_ptr<Model> m, std::vector<float> pcm, std::vector<char> wav, Options o, std::shared_ptr<std::atomic<bool>> cancel)
      : Napi::AsyncWorker(env, "svc_whisper.transcribe"), m_(std::move(m)), pcm_(std::move(pcm)), wav_(std::move(wav)), o_(std::move(o)), cancel_(std::move(cancel)),
        deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    std::lock_guard<std::mutex> lk(m_->mu);
    if (!m_->ctx) return SetError("the whisper model was disposed");
    if (cancel_->load()) return SetError("cancelled");
    if (!wav_.empty()) {
      // Decoded here, off the JS thread, as whisper-cli decodes (miniaudio: mono, 16 kHz).
      const std::string why = decodeWav(wav_.data(), wav_.size(), (uint64_t) (o_.maxSeconds * WHISPER_SAMPLE_RATE), pcm_);
      if (!why.empty()) return SetError("bad audio: " + why);
      std::vector<char>().swap(wav_);
    }
    seconds_ = (double) pcm_.size() / WHISPER_SAMPLE_RATE;
    if (pcm_.size() < MIN_SAMPLES) pcm_.resize(MIN_SAMPLES, 0.0f);
    whisper_full_params p = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
    p.n_threads = o_.threads;
    p.translate = o_.translate;
    p.language = o_.language.empty() ? "auto" : o_.language.c_str();
    p.detect_language = false;
    p.initial_prompt = o_.prompt.empty() ? nullptr : o_.prompt.c_str();
    // Temperature 0 only (the spec's limit): no fallback to sampling, so an answer is reproducible.
    p.temperature = 0.0f;
    p.temperature_inc = 0.0f;
    p.print_progress = false;
    p.print_realtime = false;
    p.print_timestamps = false;
    p.print_special = false;
    p.abort_callback = [](void * flag) { return static_cast<std::atomic<bool> *>(flag)->load(); };
    p.abort_callback_user_data = cancel_.get();
    const int64_t t0 = ggml_time_us();
    const int rc = whisper_full_with_state(m_->ctx, m_->state, p, pcm_.data(), (int) pcm_.size());
    us_ = ggml_time_us() - t0;
    if (cancel_->load()) return SetError("cancelled");
    if (rc != 0) return SetError("whisper.cpp failed to transcribe (" + std::to_string(rc) + ")");
    const int lang = whisper_full_lang_id_from_state(m_->state);
    language_ = lang >= 0 ? whisper_lang_str(lang) : "";
    const whisper_token eot = whisper_token_eot(m_->ctx);
    const int n = whisper_full_n_segments_from_state(m_->state);
    for (int i = 0; i < n; i++) {
      Segment s{whisper_full_get_segment_t0_from_state(m_->state, i), whisper_full_get_segment_t1_from_state(m_->state, i),
                whisper_full_get_segment_text_from_state(m_->state, i), whisper_full_get_segment_no_speech_prob_from_state(m_->state, i), {}};
      const int nt = whisper_full_n_tokens_from_state(m_->state, i);
      for (int k = 0; k < nt; k++) {
        whisper_token_data d = whisper_full_get_token_data_from_state(m_->state, i, k);
        s.tokens.push_back({d.id, whisper_full_get_token_text_from_state(m_->ctx, m_->state, i, k), d.p, d.plog, d.id >= eot});
      }
      segments_.push_back(std::move(s));
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    auto r = Napi::Object::New(env);
    r.Set("language", language_);
    r.Set("ms", (double) us_ / 1000.0);
    r.Set("seconds", seconds_);
    auto segs = Napi::Array::New(env, segments_.size());
    for (size_t i = 0; i < segments_.size(); i++) {
      const Segment & s = segments_[i];
      auto o = Napi::Object::New(env);
      o.Set("start", (double) s.t0 / 100.0);
      o.Set("end", (double) s.t1 / 100.0);
      o.Set("text", s.text);
      o.Set("noSpeechProb", s.noSpeech);
      auto toks = Napi::Array::New(env, s.tokens.size());
      for (size_t k = 0; k < s.tokens.size(); k++) {
        const Token & t = s.tokens[k];
        auto to = Napi::Object::New(env);
        to.Set("id", t.id);
        to.Set("text", t.text);
        to.Set("p", t.p);
        to.Set("logprob", t.plog);
        to.Set("special", t.special);
        toks.Set((uint32_t) k, to);
      }
      o.Set("tokens", toks);
      segs.Set((uint32_t) i, o);
    }
    r.Set("segments", segs);
    deferred_.Resolve(r);
  }
  void OnError(const Napi::Error & e) override { deferred_.Reject(e.Value()); }

 private:
  std::shared_ptr<Model> m_;
  std::vector<float> pcm_;
  std::vector<char> wav_;
  Options o_;
  double seconds_ = 0;
  std::shared_ptr<std::atomic<bool>> cancel_;
  Napi::Promise::Deferred deferred_;
  std::vector<Segment> segments_;
  std::string language_;
  int64_t us_ = 0;
};

class DisposeWorker : public Napi::AsyncWorker {
 public:
  DisposeWorker(Napi::Env env, std::shared_ptr<Model> m) : Napi::AsyncWorker(env, "svc_whisper.dispose"), m_(std::move(m)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    // Waits for a transcription in flight.
    std::lock_guard<std::mutex> lk(m_->mu);
    if (m_->state) whisper_free_state(m_->state);
    if (m_->ctx) whisper_free(m_->ctx);
    m_->state = nullptr;
    m_->ctx = nullptr;
  }
  void OnOK() override { deferred_.Resolve(Env().Undefined()); }
  void OnError(const Napi::Error & e) override { deferred_.Reject(e.Value()); }

 private:
  std::shared_ptr<Model> m_;
  Napi::Promise::Deferred deferred_;
};

Napi::Object wrapModel(Napi::Env env, std::shared_ptr<Model> m) {
  auto o = Napi::Object::New(env);
  auto info = Napi::Object::New(env);
  info.Set("type", whisper_model_type_readable(m->ctx));
  info.Set("multilingual", whisper_is_multilingual(m->ctx) != 0);
  info.Set("nVocab", whisper_model_n_vocab(m->ctx));
  info.Set("nMels", whisper_model_n_mels(m->ctx));
  info.Set("nAudioLayer", whisper_model_n_audio_layer(m->ctx));
  info.Set("nTextLayer", whisper_model_n_text_layer(m->ctx));
  info.Set("nAudioState", whisper_model_n_audio_state(m->ctx));
  o.Set("info", info);
  // transcribe(audio: Float32Array of 16 kHz samples | Uint8Array of a WAV file, opts) -> { promise, cancel() }
  o.Set("transcribe", Napi::Function::New(env, [m](const Napi::CallbackInfo & ci) -> Napi::Value {
    Napi::Env e = ci.Env();
    if (ci.Length() < 1 || !ci[0].IsTypedArray()) throw Napi::TypeError::New(e, "transcribe(audio: Float32Array | Uint8Array, opts)");
    std::vector<float> pcm;
    std::vector<char> wav;
    auto ta = ci[0].As<Napi::TypedArray>();
    if (ta.TypedArrayType() == napi_float32_array) {
      auto a = ci[0].As<Napi::Float32Array>();
      pcm.assign(a.Data(), a.Data() + a.ElementLength());
    } else if (ta.TypedArrayType() == napi_uint8_array) {
      auto a = ci[0].As<Napi::Uint8Array>();
      if (a.ElementLength() == 0) throw Napi::RangeError::New(e, "transcribe: empty WAV data");
      wav.assign(reinterpret_cast<const char *>(a.Data()), reinterpret_cast<const char *>(a.Data()) + a.ElementLength());
    } else {
      throw Napi::TypeError::New(e, "transcribe(audio: Float32Array | Uint8Array, opts)");
    }
    Options o;
    if (ci.Length() > 1 && ci[1].IsObject()) {
      auto opts = ci[1].As<Napi::Object>();
      o.language = optString(opts, "language");
      o.prompt = optString(opts, "prompt");
      Napi::Value tr = opts.Get("translate");
      o.translate = tr.IsBoolean() && tr.As<Napi::Boolean>().Value();
      Napi::Value ms = opts.Get("maxSeconds");
      if (ms.IsNumber()) o.maxSeconds = ms.As<Napi::Number>().DoubleValue();
      Napi::Value th = opts.Get("threads");
      if (th.IsNumber()) o.threads = std::max(1, th.As<Napi::Number>().Int32Value());
    }
    if (!o.language.empty() && o.language != "auto" && whisper_lang_id(o.language.c_str()) < 0) {
      throw Napi::RangeError::New(e, "unknown language " + o.language);
    }
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    auto * w = new TranscribeWorker(e, m, std::move(pcm), std::move(wav), o, cancel);
    auto job = Napi::Object::New(e);
    job.Set("promise", w->Promise());
    job.Set("cancel", Napi::Function::New(e, [cancel](const Napi::CallbackInfo & c) -> Napi::Value {
      cancel->store(true);
      return c.Env().Undefined();
    }));
    w->Queue();
    return job;
  }));
  o.Set("dispose", Napi::Function::New(env, [m](const Napi::CallbackInfo & ci) -> Napi::Value {
    auto * w = new DisposeWorker(ci.Env(), m);
    w->Queue();
    return w->Promise();
  }));
  return o;
}

void LoadWorker::OnOK() { deferred_.Resolve(wrapModel(Env(), model_)); }

Napi::Value LoadModel(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "loadModel(path)");
  auto * w = new LoadWorker(env, info[0].As<Napi::String>().Utf8Value());
  w->Queue();
  return w->Promise();
}

Napi::Value LanguageId(const Napi::CallbackInfo & info) {
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(info.Env(), "languageId(code)");
  return Napi::Number::New(info.Env(), whisper_lang_id(info[0].As<Napi::String>().Utf8Value().c_str()));
}

Napi::Value LanguageName(const Napi::CallbackInfo & info) {
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(info.Env(), "languageName(code)");
  const int id = whisper_lang_id(info[0].As<Napi::String>().Utf8Value().c_str());
  return Napi::String::New(info.Env(), id >= 0 ? whisper_lang_str_full(id) : "");
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  whisper_log_set(quiet, nullptr);
  exports.Set("version", Napi::String::New(env, whisper_version()));
  exports.Set("systemInfo", Napi::Function::New(env, [](const Napi::CallbackInfo & i) { return Napi::String::New(i.Env(), whisper_print_system_info()); }));
  exports.Set("loadModel", Napi::Function::New(env, LoadModel));
  exports.Set("languageId", Napi::Function::New(env, LanguageId));
  exports.Set("languageName", Napi::Function::New(env, LanguageName));
  return exports;
}

}  // namespace

NODE_API_MODULE(svc_whisper, Init)

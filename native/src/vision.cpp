#include "vision.h"

#include "context.h"
#include "mtmd-helper.h"
#include "model.h"
#include "svc.h"
#include "svc_log.h"
#include "workers.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace {

// The first line of what llama.cpp / mtmd logged as an error, for a rejection's message.
std::string firstLine(const std::string & s) {
  auto end = s.find('\n');
  std::string line = s.substr(0, end);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

class LoadProjectorWorker : public PromiseWorker {
 public:
  LoadProjectorWorker(Napi::Env env, std::shared_ptr<ModelState> model, std::string path, mtmd_context_params p)
      : PromiseWorker(env, "svc_engine.loadProjector"), model_(std::move(model)), path_(std::move(path)), p_(p) {}

  void Execute() override {
    auto st = std::make_shared<ProjectorState>();
    st->model = model_;
    LogCapture cap;
    st->mctx = mtmd_init_from_file(path_.c_str(), model_->model, p_);
    if (!st->mctx) {
      // mtmd logs why (not a projector, n_embd mismatch) before it answers null.
      std::string why = cap.text();
      auto at = why.find("mismatch");
      throw std::runtime_error("cannot load the vision projector " + path_ +
                               (why.empty() ? "" : ": " + firstLine(at != std::string::npos ? why.substr(at) : why)));
    }
    if (!mtmd_support_vision(st->mctx)) throw std::runtime_error(path_ + " is a projector without vision (audio only)");
    st_ = std::move(st);
  }
  Napi::Value Result(Napi::Env env) override {
    auto ext = Napi::External<std::shared_ptr<ProjectorState>>::New(env, &st_);
    return addonData(env).projector.New({ext});
  }

 private:
  std::shared_ptr<ModelState> model_;
  std::string path_;
  mtmd_context_params p_;
  std::shared_ptr<ProjectorState> st_;
};

class MediaTokenizeWorker : public PromiseWorker {
 public:
  MediaTokenizeWorker(Napi::Env env, std::shared_ptr<ProjectorState> proj, std::string text,
                      std::vector<std::vector<unsigned char>> images, bool add, bool parse)
      : PromiseWorker(env, "svc_engine.mediaTokenize"), proj_(std::move(proj)), text_(std::move(text)),
        images_(std::move(images)), add_(add), parse_(parse) {}

  void Execute() override {
    std::vector<mtmd_bitmap *> bitmaps;
    auto freeAll = [&] {
      for (auto * b : bitmaps) mtmd_bitmap_free(b);
    };
    for (size_t i = 0; i < images_.size(); i++) {
      LogCapture cap;
      auto w = mtmd_helper_bitmap_init_from_buf(proj_->mctx, images_[i].data(), images_[i].size(), false,
                                                mtmd_helper_init_opt_default());
      if (w.video_ctx) mtmd_helper_video_free(w.video_ctx);
      if (!w.bitmap || mtmd_bitmap_is_audio(w.bitmap)) {
        if (w.bitmap) mtmd_bitmap_free(w.bitmap);
        freeAll();
        throw std::runtime_error("image " + std::to_string(i + 1) +
                                 " cannot be decoded: not a PNG, JPEG, GIF, BMP, TGA, PSD, HDR or PNM image that stb_image reads");
      }
      bitmaps.push_back(w.bitmap);
    }
    auto st = std::make_shared<MediaPromptState>();
    st->projector = proj_;
    st->chunks = mtmd_input_chunks_init();
    mtmd_input_text in{text_.c_str(), text_.size(), add_, parse_};
    LogCapture cap;
    int32_t r = mtmd_tokenize(proj_->mctx, st->chunks, &in, (const mtmd_bitmap * const *) bitmaps.data(), bitmaps.size());
    freeAll();
    if (r == 1) throw std::runtime_error("the prompt's media markers do not match its images");
    if (r != 0) throw std::runtime_error("an image could not be prepared for the projector" + (cap.text().empty() ? "" : ": " + firstLine(cap.text())));
    st_ = std::move(st);
  }
  Napi::Value Result(Napi::Env env) override {
    auto ext = Napi::External<std::shared_ptr<MediaPromptState>>::New(env, &st_);
    return addonData(env).mediaPrompt.New({ext});
  }

 private:
  std::shared_ptr<ProjectorState> proj_;
  std::string text_;
  std::vector<std::vector<unsigned char>> images_;
  bool add_, parse_;
  std::shared_ptr<MediaPromptState> st_;
};

// One media chunk encoded (clip) and decoded into a sequence, on the context's engine thread
// while busy is held: no step or KV operation runs on the context meanwhile.
class EvalMediaWorker : public BusyWorker {
 public:
  EvalMediaWorker(Napi::Env env, std::shared_ptr<ContextState> cs, std::shared_ptr<MediaPromptState> mp, size_t index,
                  llama_seq_id seq, llama_pos nPast)
      : BusyWorker(env, "svc_engine.evalMedia", std::move(cs)), mp_(std::move(mp)), index_(index), seq_(seq), nPast_(nPast) {}

  void Execute() override {
    const mtmd_input_chunk * chunk = mtmd_input_chunks_get(mp_->chunks, index_);
    mtmd_context * mctx = mp_->projector->mctx;
    const size_t n = mtmd_input_chunk_get_n_tokens(chunk);
    // An image attending to itself both ways must be decoded in one micro-batch.
    if (mtmd_decode_use_non_causal(mctx, chunk) && n > llama_n_ubatch(cs_->ctx)) {
      throw std::runtime_error("an image of " + std::to_string(n) + " positions does not fit one micro-batch of " +
                               std::to_string(llama_n_ubatch(cs_->ctx)) + " (raise -batch-size)");
    }
    std::lock_guard<std::mutex> lock(mp_->projector->encodeMu);
    cs_->resumeCompute(true);
    LogCapture cap;
    llama_pos past = nPast_;
    status_ = mtmd_helper_eval_chunk_single(mctx, cs_->ctx, chunk, nPast_, seq_, cs_->nBatch, false, &past);
    newPast_ = past;
    if (status_ != 0 && status_ != 1) error_ = firstLine(cap.text());
  }
  // {status: 0 ok | 1 no KV slot | other: failed, nPast, error}
  Napi::Value Result(Napi::Env env) override {
    auto o = Napi::Object::New(env);
    o.Set("status", Napi::Number::New(env, status_));
    o.Set("nPast", Napi::Number::New(env, newPast_));
    if (!error_.empty()) o.Set("error", Napi::String::New(env, error_));
    return o;
  }

 private:
  std::shared_ptr<MediaPromptState> mp_;
  size_t index_;
  llama_seq_id seq_;
  llama_pos nPast_;
  int32_t status_ = 0;
  llama_pos newPast_ = 0;
  std::string error_;
};

}  // namespace

Napi::Value loadProjector(const Napi::CallbackInfo & info, const std::shared_ptr<ModelState> & model) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throwType(env, "loadProjector(path, opts?): path must be a string");
  auto p = mtmd_context_params_default();
  p.print_timings = false;
  p.warmup = false;
  p.use_gpu = std::string(SVC_BACKEND) != "cpu";
  p.n_threads = 1;
  if (info.Length() > 1 && info[1].IsObject()) {
    auto o = info[1].As<Napi::Object>();
    p.n_threads = (int) optNumber(o, "nThreads", 1);
    if (hasOpt(o, "useGpu")) p.use_gpu = p.use_gpu && optBool(o, "useGpu", true);
  }
  if (p.n_threads < 1) throwRange(env, "loadProjector: nThreads must be >= 1");
  auto * w = new LoadProjectorWorker(env, model, info[0].As<Napi::String>().Utf8Value(), p);
  auto promise = w->Promise();
  w->Queue();
  return promise;
}

// ---- Projector --------------------------------------------------------------

Napi::Function Projector::Define(Napi::Env env) {
  return DefineClass(env, "NativeProjector", {
    InstanceMethod<&Projector::Tokenize>("tokenize"),
    InstanceMethod<&Projector::Dispose>("dispose"),
  });
}

Projector::Projector(const Napi::CallbackInfo & info) : Napi::ObjectWrap<Projector>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsExternal()) throwType(env, "NativeProjector is created by model.loadProjector()");
  st_ = *info[0].As<Napi::External<std::shared_ptr<ProjectorState>>>().Data();
  Value().TypeTag(&kTagProjector);
  auto self = Value();
  self.DefineProperty(Napi::PropertyDescriptor::Value("marker", Napi::String::New(env, mtmd_default_marker()), napi_enumerable));
  self.DefineProperty(Napi::PropertyDescriptor::Value("usesMrope", Napi::Boolean::New(env, mtmd_decode_use_mrope(st_->mctx)), napi_enumerable));
  // An image attending to itself both ways (gemma3): decoded in one micro-batch (EvalMediaWorker).
  self.DefineProperty(Napi::PropertyDescriptor::Value("nonCausalImages", Napi::Boolean::New(env, mtmd_decode_use_non_causal(st_->mctx, nullptr)), napi_enumerable));
}

// tokenize(text, images: Buffer[], addSpecial, parseSpecial): Promise<NativeMediaPrompt>
Napi::Value Projector::Tokenize(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  if (!st_) throwError(env, "projector is disposed");
  if (info.Length() < 4 || !info[0].IsString() || !info[1].IsArray() || !info[2].IsBoolean() || !info[3].IsBoolean()) {
    throwType(env, "tokenize(text, images, addSpecial, parseSpecial)");
  }
  auto arr = info[1].As<Napi::Array>();
  std::vector<std::vector<unsigned char>> images;
  for (uint32_t i = 0; i < arr.Length(); i++) {
    Napi::Value v = arr.Get(i);
    if (!v.IsBuffer()) throwType(env, "tokenize: images must be Buffers");
    auto b = v.As<Napi::Buffer<unsigned char>>();
    images.emplace_back(b.Data(), b.Data() + b.Length());
  }
  auto * w = new MediaTokenizeWorker(env, st_, info[0].As<Napi::String>().Utf8Value(), std::move(images),
                                     info[2].As<Napi::Boolean>().Value(), info[3].As<Napi::Boolean>().Value());
  auto promise = w->Promise();
  w->Queue();
  return promise;
}

void Projector::Dispose(const Napi::CallbackInfo &) {
  st_.reset();  // prompts and in-flight workers hold their own reference
}

// ---- MediaPrompt ------------------------------------------------------------

Napi::Function MediaPrompt::Define(Napi::Env env) {
  return DefineClass(env, "NativeMediaPrompt", {
    InstanceMethod<&MediaPrompt::Dispose>("dispose"),
  });
}

MediaPrompt::MediaPrompt(const Napi::CallbackInfo & info) : Napi::ObjectWrap<MediaPrompt>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsExternal()) throwType(env, "NativeMediaPrompt is created by projector.tokenize()");
  st_ = *info[0].As<Napi::External<std::shared_ptr<MediaPromptState>>>().Data();
  Value().TypeTag(&kTagMediaPrompt);
  const size_t n = mtmd_input_chunks_size(st_->chunks);
  auto chunks = Napi::Array::New(env, n);
  for (size_t i = 0; i < n; i++) {
    const mtmd_input_chunk * c = mtmd_input_chunks_get(st_->chunks, i);
    auto o = Napi::Object::New(env);
    auto type = mtmd_input_chunk_get_type(c);
    o.Set("type", type == MTMD_INPUT_CHUNK_TYPE_TEXT ? "text" : type == MTMD_INPUT_CHUNK_TYPE_IMAGE ? "image" : "audio");
    o.Set("nTokens", Napi::Number::New(env, (double) mtmd_input_chunk_get_n_tokens(c)));
    o.Set("nPos", Napi::Number::New(env, (double) mtmd_input_chunk_get_n_pos(c)));
    if (type == MTMD_INPUT_CHUNK_TYPE_TEXT) {
      size_t nt = 0;
      const llama_token * t = mtmd_input_chunk_get_tokens_text(c, &nt);
      auto arr = Napi::Int32Array::New(env, nt);
      for (size_t k = 0; k < nt; k++) arr[k] = t[k];
      o.Set("tokens", arr);
    } else {
      const char * id = mtmd_input_chunk_get_id(c);
      o.Set("id", Napi::String::New(env, id ? id : ""));
    }
    chunks[i] = o;
  }
  Value().DefineProperty(Napi::PropertyDescriptor::Value("chunks", chunks, napi_enumerable));
}

std::shared_ptr<MediaPromptState> MediaPrompt::state(Napi::Env env) const {
  if (!st_) throwError(env, "media prompt is disposed");
  return st_;
}

void MediaPrompt::Dispose(const Napi::CallbackInfo &) {
  st_.reset();
}

// ---- Context::evalMedia -----------------------------------------------------

// evalMedia(prompt, chunkIndex, seq, nPast): Promise<{status, nPast, error?}>
Napi::Value Context::EvalMedia(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  auto st = state(env);
  if (info.Length() < 4 || !info[0].IsObject() || !info[0].As<Napi::Object>().CheckTypeTag(&kTagMediaPrompt)) {
    throwType(env, "evalMedia(prompt, chunkIndex, seq, nPast): prompt must be a NativeMediaPrompt");
  }
  auto mp = MediaPrompt::Unwrap(info[0].As<Napi::Object>())->state(env);
  if (mp->projector->model != st->model) throwError(env, "evalMedia: the prompt was made by another model's projector");
  if (!info[1].IsNumber() || !info[2].IsNumber() || !info[3].IsNumber()) throwType(env, "evalMedia: chunkIndex, seq and nPast must be numbers");
  const int64_t index = info[1].As<Napi::Number>().Int64Value();
  if (index < 0 || (size_t) index >= mtmd_input_chunks_size(mp->chunks)) throwRange(env, "evalMedia: chunkIndex out of range");
  if (mtmd_input_chunk_get_type(mtmd_input_chunks_get(mp->chunks, (size_t) index)) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
    throwType(env, "evalMedia: that chunk is text (decode it with step())");
  }
  const int32_t seq = info[2].As<Napi::Number>().Int32Value();
  if (seq < 0 || seq >= st->nSeqMax) throwRange(env, "seq " + std::to_string(seq) + " out of range");
  const int32_t nPast = info[3].As<Napi::Number>().Int32Value();
  if (nPast < 0) throwRange(env, "evalMedia: nPast must be >= 0");
  auto * w = new EvalMediaWorker(env, st, mp, (size_t) index, seq, nPast);
  return w->Queue(env);
}

#include "model.h"
#include "vision.h"

#include "chat_prompt.h"
#include "common.h"
#include "context.h"
#include "embedder.h"
#include "svc.h"
#include "svc_log.h"
#include "workers.h"

#include <cstring>
#include <vector>

// common_chat_templates_init rethrows jinja errors by value (sliced to a bare
// std::exception); re-parse the source to recover the real message.
static common_chat_templates_ptr initTemplates(const llama_model * m, const std::string & src) {
  try {
    return common_chat_templates_init(m, src);
  } catch (const std::exception &) {
    const char * own = llama_model_chat_template(m, nullptr);
    std::string tmpl = !src.empty() ? src : (own ? own : "");
    try {
      common_chat_template probe(tmpl, "", "");
    } catch (const std::exception & e) {
      throw std::runtime_error(std::string("invalid chat template: ") + e.what());
    }
    throw;
  }
}

const common_chat_templates * ModelState::templates(const std::string & override_src) {
  std::lock_guard<std::mutex> lock(tmplMu);
  if (override_src.empty()) {
    // No GGUF template: common falls back to chatml.
    if (!tmpls) tmpls = initTemplates(model, "");
    return tmpls.get();
  }
  auto it = overrides.find(override_src);
  if (it != overrides.end()) return it->second.get();
  if (overrides.size() >= 8) overrides.clear();  // bound memory; overrides are rare
  auto t = initTemplates(model, override_src);
  auto * raw = t.get();
  overrides.emplace(override_src, std::move(t));
  return raw;
}

Napi::Int32Array toInt32Array(Napi::Env env, const std::vector<llama_token> & toks) {
  auto arr = Napi::Int32Array::New(env, toks.size());
  if (!toks.empty()) std::memcpy(arr.Data(), toks.data(), toks.size() * sizeof(int32_t));
  return arr;
}

static std::string metaString(int32_t (*fn)(const llama_model *, int32_t, char *, size_t), const llama_model * m, int32_t i) {
  std::vector<char> buf(256);
  int32_t n = fn(m, i, buf.data(), buf.size());
  if (n < 0) return "";
  if ((size_t) n >= buf.size()) {
    buf.resize(n + 1);
    fn(m, i, buf.data(), buf.size());
  }
  return std::string(buf.data());
}

static Napi::Object buildInfo(Napi::Env env, const ModelState & st) {
  const llama_model * m = st.model;
  const llama_vocab * v = st.vocab;
  auto info = Napi::Object::New(env);
  auto meta = Napi::Object::New(env);
  std::string arch;
  for (int32_t i = 0, n = llama_model_meta_count(m); i < n; i++) {
    std::string k = metaString(llama_model_meta_key_by_index, m, i);
    std::string val = metaString(llama_model_meta_val_str_by_index, m, i);
    if (k == "general.architecture") arch = val;
    meta.Set(k, val);
  }
  char desc[256] = {0};
  llama_model_desc(m, desc, sizeof(desc));
  const char * tmpl = llama_model_chat_template(m, nullptr);
  info.Set("architecture", arch);
  info.Set("nCtxTrain", llama_model_n_ctx_train(m));
  info.Set("nEmbd", llama_model_n_embd(m));
  info.Set("nLayer", llama_model_n_layer(m));
  info.Set("nHead", llama_model_n_head(m));
  info.Set("nHeadKv", llama_model_n_head_kv(m));
  info.Set("nVocab", llama_vocab_n_tokens(v));
  info.Set("nParams", (double) llama_model_n_params(m));
  info.Set("sizeBytes", (double) llama_model_size(m));
  info.Set("chatTemplate", tmpl ? Napi::Value(Napi::String::New(env, tmpl)) : env.Null());
  info.Set("bos", llama_vocab_bos(v));
  info.Set("eos", llama_vocab_eos(v));
  info.Set("eot", llama_vocab_eot(v));
  info.Set("addBos", llama_vocab_get_add_bos(v));
  // Fill-in-the-middle markers (-1 where the vocabulary has none): /api/generate's suffix.
  info.Set("fimPre", llama_vocab_fim_pre(v));
  info.Set("fimSuf", llama_vocab_fim_suf(v));
  info.Set("fimMid", llama_vocab_fim_mid(v));
  info.Set("hasEncoder", llama_model_has_encoder(m));
  info.Set("hasDecoder", llama_model_has_decoder(m));
  info.Set("description", std::string(desc));
  info.Set("metadata", meta);
  info.Set("hugePages", hugePageInfo(env, st.hugePages));
  return info;
}

// ---- loadModel ----------------------------------------------------------

namespace {
class LoadWorker : public PromiseWorker {
 public:
  LoadWorker(Napi::Env env, std::string path, llama_model_params p, bool hugePages)
      : PromiseWorker(env, "svc_engine.loadModel"), path_(std::move(path)), params_(p), hugePages_(hugePages) {}

  void Execute() override {
    ensureBackend();
    auto st = std::make_shared<ModelState>();
    if (hugePages_) {
      before_ = readSelfMaps();
      params_.progress_callback = &LoadWorker::onProgress;
      params_.progress_callback_user_data = this;
    }
    LogCapture cap;  // llama.cpp logs why a load failed; put it in the error
    st->model = llama_model_load_from_file(path_.c_str(), params_);
    if (!st->model) {
      std::string why = cap.text().empty() ? "" : ": " + cap.text();
      throw std::runtime_error("failed to load model from " + path_ + why);
    }
    st->vocab = llama_model_get_vocab(st->model);
    for (llama_token t = 0, n = llama_vocab_n_tokens(st->vocab); t < n; t++) {
      if (llama_vocab_is_eog(st->vocab, t)) st->eogTokens.push_back(t);
    }
    st->hugePages = hugePageResult_;
    st_ = std::move(st);
  }
  Napi::Value Result(Napi::Env env) override {
    auto ext = Napi::External<std::shared_ptr<ModelState>>::New(env, &st_);
    return addonData(env).model.New({ext});
  }

 private:
  // The loader calls this before reading each tensor: the first call comes after
  // the weight buffers exist and before any weight is read into them.
  static bool onProgress(float, void * self) {
    auto * w = static_cast<LoadWorker *>(self);
    if (!w->advised_) {
      w->advised_ = true;
      w->hugePageResult_ = adviseNewMappings(w->before_, 8u << 20, false);
    }
    return true;
  }

  std::string path_;
  llama_model_params params_;
  bool hugePages_;
  bool advised_ = false;
  std::vector<MapRegion> before_;
  HugePageResult hugePageResult_;
  std::shared_ptr<ModelState> st_;
};
}  // namespace

Napi::Value Model::Load(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throwType(env, "loadModel(path, opts?): path must be a string");
  std::string path = info[0].As<Napi::String>().Utf8Value();
  auto p = llama_model_default_params();
  std::string backend = SVC_BACKEND;
  int def_layers = backend == "cpu" ? 0 : 999;
  int ngl = def_layers;
  bool hugePages = false;
  if (info.Length() > 1 && info[1].IsObject()) {
    auto o = info[1].As<Napi::Object>();
    ngl = (int) optNumber(o, "nGpuLayers", def_layers);
    if (ngl < 0) ngl = 999;  // -1 = all
    // This llama.cpp has load_mode instead of use_mmap: true = mmap, false = plain reads.
    if (hasOpt(o, "useMmap")) p.load_mode = optBool(o, "useMmap", true) ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
    // Huge pages only back anonymous memory: the weights are read, not mapped.
    hugePages = optBool(o, "hugePages", false);
    if (hugePages) p.load_mode = LLAMA_LOAD_MODE_NONE;
  }
  p.n_gpu_layers = backend == "cpu" ? 0 : ngl;
  auto * w = new LoadWorker(env, path, p, hugePages);
  auto promise = w->Promise();
  w->Queue();
  return promise;
}

// ---- Model ----------------------------------------------------------------

Napi::Function Model::Define(Napi::Env env) {
  return DefineClass(env, "NativeModel", {
    InstanceMethod<&Model::Tokenize>("tokenize"),
    InstanceMethod<&Model::TokenizeSync>("tokenizeSync"),
    InstanceMethod<&Model::TokenToPiece>("tokenToPiece"),
    InstanceMethod<&Model::Detokenize>("detokenize"),
    InstanceMethod<&Model::IsEog>("isEog"),
    InstanceMethod<&Model::ApplyChatTemplate>("applyChatTemplate"),
    InstanceMethod<&Model::CreateContext>("createContext"),
    InstanceMethod<&Model::CreateEmbedder>("createEmbedder"),
    InstanceMethod<&Model::RerankInputs>("rerankInputs"),
    InstanceMethod<&Model::LoadProjector>("loadProjector"),
    InstanceMethod<&Model::Dispose>("dispose"),
  });
}

Model::Model(const Napi::CallbackInfo & info) : Napi::ObjectWrap<Model>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsExternal()) throwType(env, "NativeModel is created by loadModel()");
  st_ = *info[0].As<Napi::External<std::shared_ptr<ModelState>>>().Data();
  Value().TypeTag(&kTagModel);
  Value().DefineProperty(Napi::PropertyDescriptor::Value("info", buildInfo(env, *st_), napi_enumerable));
}

std::shared_ptr<ModelState> Model::state(Napi::Env env) const {
  if (!st_) throwError(env, "model is disposed");
  return st_;
}

static std::vector<llama_token> readTokens(Napi::Env env, const Napi::Value & v, const llama_vocab * vocab) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    throwType(env, "tokens must be an Int32Array");
  }
  auto a = v.As<Napi::Int32Array>();
  std::vector<llama_token> out(a.Data(), a.Data() + a.ElementLength());
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  for (auto t : out) {
    if (t < 0 || t >= n_vocab) throwRange(env, "token id " + std::to_string(t) + " out of range");
  }
  return out;
}

namespace {
class TokenizeWorker : public PromiseWorker {
 public:
  TokenizeWorker(Napi::Env env, std::shared_ptr<ModelState> st, std::string text, bool add, bool parse)
      : PromiseWorker(env, "svc_engine.tokenize"), st_(std::move(st)), text_(std::move(text)), add_(add), parse_(parse) {}
  void Execute() override { toks_ = common_tokenize(st_->vocab, text_, add_, parse_); }
  Napi::Value Result(Napi::Env env) override { return toInt32Array(env, toks_); }

 private:
  std::shared_ptr<ModelState> st_;
  std::string text_;
  bool add_, parse_;
  std::vector<llama_token> toks_;
};
}  // namespace

static void tokenizeArgs(const Napi::CallbackInfo & info, std::string & text, bool & add, bool & parse) {
  if (info.Length() < 1 || !info[0].IsString()) throwType(info.Env(), "tokenize(text, addSpecial, parseSpecial): text must be a string");
  text = info[0].As<Napi::String>().Utf8Value();
  add = info.Length() > 1 && info[1].ToBoolean().Value();
  parse = info.Length() > 2 && info[2].ToBoolean().Value();
}

Napi::Value Model::Tokenize(const Napi::CallbackInfo & info) {
  std::string text;
  bool add, parse;
  tokenizeArgs(info, text, add, parse);
  auto * w = new TokenizeWorker(info.Env(), state(info.Env()), std::move(text), add, parse);
  auto promise = w->Promise();
  w->Queue();
  return promise;
}

Napi::Value Model::TokenizeSync(const Napi::CallbackInfo & info) {
  std::string text;
  bool add, parse;
  tokenizeArgs(info, text, add, parse);
  return toInt32Array(info.Env(), common_tokenize(state(info.Env())->vocab, text, add, parse));
}

Napi::Value Model::TokenToPiece(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  auto st = state(env);
  if (info.Length() < 1 || !info[0].IsNumber()) throwType(env, "tokenToPiece(token, special): token must be a number");
  int32_t t = info[0].As<Napi::Number>().Int32Value();
  if (t < 0 || t >= llama_vocab_n_tokens(st->vocab)) throwRange(env, "token id " + std::to_string(t) + " out of range");
  bool special = info.Length() > 1 && info[1].ToBoolean().Value();
  std::string piece = common_token_to_piece(st->vocab, t, special);
  return Napi::Buffer<char>::Copy(env, piece.data(), piece.size());
}

Napi::Value Model::Detokenize(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  auto st = state(env);
  if (info.Length() < 1) throwType(env, "detokenize(tokens, special)");
  auto toks = readTokens(env, info[0], st->vocab);
  bool special = info.Length() > 1 && info[1].ToBoolean().Value();
  return Napi::String::New(env, common_detokenize(st->vocab, toks, special));
}

Napi::Value Model::IsEog(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  auto st = state(env);
  if (info.Length() < 1 || !info[0].IsNumber()) throwType(env, "isEog(token): token must be a number");
  int32_t t = info[0].As<Napi::Number>().Int32Value();
  if (t < 0 || t >= llama_vocab_n_tokens(st->vocab)) return Napi::Boolean::New(env, false);
  return Napi::Boolean::New(env, llama_vocab_is_eog(st->vocab, t));
}

Napi::Value Model::ApplyChatTemplate(const Napi::CallbackInfo & info) {
  return applyChatTemplate(info, state(info.Env()));
}

Napi::Value Model::CreateContext(const Napi::CallbackInfo & info) {
  return createContext(info, state(info.Env()));
}

Napi::Value Model::CreateEmbedder(const Napi::CallbackInfo & info) {
  return createEmbedder(info, state(info.Env()));
}

Napi::Value Model::RerankInputs(const Napi::CallbackInfo & info) {
  return rerankInputs(info, state(info.Env()));
}

Napi::Value Model::LoadProjector(const Napi::CallbackInfo & info) {
  return loadProjector(info, state(info.Env()));
}

void Model::Dispose(const Napi::CallbackInfo &) {
  // Contexts/samplers/workers keep their own references; the llama_model is
  // freed when the last of them goes.
  st_.reset();
}

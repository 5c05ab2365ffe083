// NativeModel: a loaded llama_model plus lazily created chat templates.
#pragma once

#include <napi.h>

#include "chat.h"
#include "hugepages.h"
#include "llama.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

// Owned by the JS Model and shared with contexts, samplers and workers, so the
// llama_model outlives everything that uses it regardless of dispose order.
struct ModelState {
  llama_model * model = nullptr;
  const llama_vocab * vocab = nullptr;
  // End-of-generation tokens, found once at load: ignore_eos bans them per request,
  // and scanning a 151k-token vocabulary each time cost ~1 ms of every such request.
  std::vector<llama_token> eogTokens;
  HugePageResult hugePages;  // what the load put on 2 MiB pages (hugepages.h)

  std::mutex tmplMu;                                        // JS thread only today; cheap insurance
  common_chat_templates_ptr tmpls;                          // model's own template (lazy)
  std::map<std::string, common_chat_templates_ptr> overrides;  // templateOverride cache

  ~ModelState() {
    tmpls.reset();
    overrides.clear();
    if (model) llama_model_free(model);
  }
  // Model template, or an override (cached, small LRU-less cap).
  const common_chat_templates * templates(const std::string & override_src);
};

class Model : public Napi::ObjectWrap<Model> {
 public:
  static Napi::Function Define(Napi::Env env);
  static Napi::Value Load(const Napi::CallbackInfo & info);  // addon.loadModel
  explicit Model(const Napi::CallbackInfo & info);

  std::shared_ptr<ModelState> state(Napi::Env env) const;

 private:
  Napi::Value Tokenize(const Napi::CallbackInfo & info);
  Napi::Value TokenizeSync(const Napi::CallbackInfo & info);
  Napi::Value TokenToPiece(const Napi::CallbackInfo & info);
  Napi::Value Detokenize(const Napi::CallbackInfo & info);
  Napi::Value IsEog(const Napi::CallbackInfo & info);
  Napi::Value ApplyChatTemplate(const Napi::CallbackInfo & info);
  Napi::Value CreateContext(const Napi::CallbackInfo & info);
  Napi::Value CreateEmbedder(const Napi::CallbackInfo & info);
  Napi::Value RerankInputs(const Napi::CallbackInfo & info);
  Napi::Value LoadProjector(const Napi::CallbackInfo & info);
  void Dispose(const Napi::CallbackInfo & info);

  std::shared_ptr<ModelState> st_;
};

Napi::Int32Array toInt32Array(Napi::Env env, const std::vector<llama_token> & toks);

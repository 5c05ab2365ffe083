// Image input through a vision projector (libmtmd: clip + stb_image). A NativeProjector belongs
// to one loaded model; it tokenizes a prompt holding media markers and image bytes into chunks
// (a NativeMediaPrompt), and Context::evalMedia writes one image chunk into a sequence of the
// shared llama_context on that context's engine thread (see libs/engine/src/backend/native-addon.ts).
#pragma once

#include <napi.h>

#include "mtmd.h"

#include <memory>
#include <mutex>

struct ModelState;

struct ProjectorState {
  std::shared_ptr<ModelState> model;  // keeps the llama_model alive
  mtmd_context * mctx = nullptr;
  // mtmd_encode_chunk keeps its output in the mtmd_context: one encode at a time.
  std::mutex encodeMu;
  ~ProjectorState() {
    if (mctx) mtmd_free(mctx);
  }
};

struct MediaPromptState {
  std::shared_ptr<ProjectorState> projector;
  mtmd_input_chunks * chunks = nullptr;
  ~MediaPromptState() {
    if (chunks) mtmd_input_chunks_free(chunks);
  }
};

constexpr napi_type_tag kTagProjector   = {0x7f1c2a9b3d4e5f64ULL, 0x1a2b3c4d5e6f7085ULL};
constexpr napi_type_tag kTagMediaPrompt = {0x7f1c2a9b3d4e5f65ULL, 0x1a2b3c4d5e6f7086ULL};

class Projector : public Napi::ObjectWrap<Projector> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit Projector(const Napi::CallbackInfo & info);

 private:
  Napi::Value Tokenize(const Napi::CallbackInfo & info);
  void Dispose(const Napi::CallbackInfo & info);
  std::shared_ptr<ProjectorState> st_;
};

class MediaPrompt : public Napi::ObjectWrap<MediaPrompt> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit MediaPrompt(const Napi::CallbackInfo & info);
  std::shared_ptr<MediaPromptState> state(Napi::Env env) const;

 private:
  void Dispose(const Napi::CallbackInfo & info);
  std::shared_ptr<MediaPromptState> st_;
};

// model.loadProjector(path, opts)
Napi::Value loadProjector(const Napi::CallbackInfo & info, const std::shared_ptr<ModelState> & model);

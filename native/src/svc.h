// Shared declarations for the svc engine addon: per-env class constructors,
// type tags (so Unwrap never reinterprets a foreign object), small helpers.
#pragma once

#include <napi.h>

#include <memory>
#include <string>

struct ModelState;
struct ChatPromptState;

// Constructors of the wrapped classes, kept per env (worker threads of Node
// each load their own instance).
struct AddonData {
  Napi::FunctionReference model;
  Napi::FunctionReference context;
  Napi::FunctionReference sampler;
  Napi::FunctionReference chatPrompt;
  Napi::FunctionReference embedder;
  Napi::FunctionReference projector;
  Napi::FunctionReference mediaPrompt;
};

inline AddonData & addonData(Napi::Env env) { return *env.GetInstanceData<AddonData>(); }

// napi type tags: checked before every Unwrap of an object passed in from JS.
constexpr napi_type_tag kTagModel      = {0x7f1c2a9b3d4e5f60ULL, 0x1a2b3c4d5e6f7081ULL};
constexpr napi_type_tag kTagContext    = {0x7f1c2a9b3d4e5f61ULL, 0x1a2b3c4d5e6f7082ULL};
constexpr napi_type_tag kTagSampler    = {0x7f1c2a9b3d4e5f62ULL, 0x1a2b3c4d5e6f7083ULL};
constexpr napi_type_tag kTagChatPrompt = {0x7f1c2a9b3d4e5f63ULL, 0x1a2b3c4d5e6f7084ULL};

inline bool hasTag(const Napi::Value & v, const napi_type_tag & tag) {
  return v.IsObject() && v.As<Napi::Object>().CheckTypeTag(&tag);
}

[[noreturn]] inline void throwType(Napi::Env env, const std::string & msg) {
  throw Napi::TypeError::New(env, msg);
}
[[noreturn]] inline void throwRange(Napi::Env env, const std::string & msg) {
  throw Napi::RangeError::New(env, msg);
}
[[noreturn]] inline void throwError(Napi::Env env, const std::string & msg) {
  throw Napi::Error::New(env, msg);
}

// Optional option readers: absent/undefined/null keep the default.
inline bool hasOpt(const Napi::Object & o, const char * k) {
  if (!o.Has(k)) return false;
  Napi::Value v = o.Get(k);
  return !v.IsUndefined() && !v.IsNull();
}
inline double optNumber(const Napi::Object & o, const char * k, double def) {
  if (!hasOpt(o, k)) return def;
  Napi::Value v = o.Get(k);
  if (!v.IsNumber()) throwType(o.Env(), std::string("option '") + k + "' must be a number");
  return v.As<Napi::Number>().DoubleValue();
}
inline bool optBool(const Napi::Object & o, const char * k, bool def) {
  if (!hasOpt(o, k)) return def;
  Napi::Value v = o.Get(k);
  if (!v.IsBoolean()) throwType(o.Env(), std::string("option '") + k + "' must be a boolean");
  return v.As<Napi::Boolean>().Value();
}
inline std::string optString(const Napi::Object & o, const char * k, const std::string & def) {
  if (!hasOpt(o, k)) return def;
  Napi::Value v = o.Get(k);
  if (!v.IsString()) throwType(o.Env(), std::string("option '") + k + "' must be a string");
  return v.As<Napi::String>().Utf8Value();
}

// Unwrap a ChatPrompt object passed from JS (defined in chat.cpp).
std::shared_ptr<const ChatPromptState> unwrapChatPrompt(const Napi::Value & v);

// Initialise llama/ggml backends once per process (addon.cpp).
void ensureBackend();

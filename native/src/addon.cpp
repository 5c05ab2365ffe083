// Module init for svc_engine.node: backend name, logger, systemInfo,
// deviceCount, loadModel, exitNow. See libs/engine/src/backend/native-addon.ts.
#include <napi.h>

#include "chat_prompt.h"
#include "context.h"
#include "embedder.h"
#include "ggml-backend.h"
#include "llama.h"
#include "log.h"  // llama.cpp common/log.h (ours is svc_log.h)
#include "model.h"
#include "sampler.h"
#include "svc.h"
#include "svc_log.h"
#include "vision.h"

#include <cstdio>
#include <mutex>
#include <unistd.h>

void ensureBackend() {
  static std::once_flag once;
  std::call_once(once, [] {
    logInstall();  // before anything can log: default is silence
    // common's LOG_* go to its own stdout/stderr worker; pausing it drops them.
    common_log_pause(common_log_main());
    llama_backend_init();
  });
}

static Napi::Value SystemInfo(const Napi::CallbackInfo & info) {
  return Napi::String::New(info.Env(), llama_print_system_info());
}

static Napi::Value DeviceCount(const Napi::CallbackInfo & info) {
  size_t n = 0;
  for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
    auto type = ggml_backend_dev_type(ggml_backend_dev_get(i));
    if (type == GGML_BACKEND_DEVICE_TYPE_GPU || type == GGML_BACKEND_DEVICE_TYPE_IGPU) n++;
  }
  return Napi::Number::New(info.Env(), (double) n);
}

static Napi::Value SetLogger(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  Napi::Value fn = info.Length() > 0 ? info[0] : env.Null();
  if (!fn.IsFunction() && !fn.IsNull() && !fn.IsUndefined()) throwType(env, "setLogger(fn | null)");
  logSetJs(env, fn);
  return env.Undefined();
}

// The forced stop (a second signal, the shutdown's time limit): ends the process without running
// exit handlers or static destructors, which tore llama.cpp's state down under a decode still
// running on a worker thread (SIGSEGV instead of the exit status asked for).
static Napi::Value ExitNow(const Napi::CallbackInfo & info) {
  const int code = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().Int32Value() : 1;
  fflush(stdout);
  fflush(stderr);
  _exit(code);
}

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  ensureBackend();
  auto * data = new AddonData();
  data->model = Napi::Persistent(Model::Define(env));
  data->context = Napi::Persistent(Context::Define(env));
  data->sampler = Napi::Persistent(Sampler::Define(env));
  data->chatPrompt = Napi::Persistent(ChatPrompt::Define(env));
  data->embedder = Napi::Persistent(Embedder::Define(env));
  data->projector = Napi::Persistent(Projector::Define(env));
  data->mediaPrompt = Napi::Persistent(MediaPrompt::Define(env));
  env.SetInstanceData<AddonData>(data);
  env.AddCleanupHook([] { logShutdown(); });

  exports.DefineProperty(Napi::PropertyDescriptor::Value("backend", Napi::String::New(env, SVC_BACKEND), napi_enumerable));
  exports.Set("systemInfo", Napi::Function::New<SystemInfo>(env, "systemInfo"));
  exports.Set("deviceCount", Napi::Function::New<DeviceCount>(env, "deviceCount"));
  exports.Set("setLogger", Napi::Function::New<SetLogger>(env, "setLogger"));
  exports.Set("exitNow", Napi::Function::New<ExitNow>(env, "exitNow"));
  exports.Set("loadModel", Napi::Function::New<Model::Load>(env, "loadModel"));
  return exports;
}

NODE_API_MODULE(svc_engine, Init)

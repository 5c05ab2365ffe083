#include "svc_log.h"

#include "ggml.h"
#include "llama.h"
#include "mtmd-helper.h"

#include <mutex>
#include <optional>

namespace {

std::mutex g_mu;
std::optional<Napi::ThreadSafeFunction> g_tsfn;  // guarded by g_mu
thread_local std::string * g_capture = nullptr;

struct LogLine {
  int level;
  std::string text;
};

void onLog(ggml_log_level level, const char * text, void * /*user*/) {
  if (!text) return;
  if (g_capture && (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN)) {
    g_capture->append(text);
  }
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_tsfn) return;  // no logger: drop silently
  auto * line = new LogLine{static_cast<int>(level), text};
  napi_status st = g_tsfn->NonBlockingCall(line, [](Napi::Env env, Napi::Function fn, LogLine * l) {
    std::unique_ptr<LogLine> own(l);
    if (env == nullptr || fn.IsEmpty()) return;
    try {
      fn.Call({Napi::Number::New(env, own->level), Napi::String::New(env, own->text)});
    } catch (const Napi::Error &) {
      // A throwing logger must not take down the engine.
    }
  });
  if (st != napi_ok) delete line;
}

}  // namespace

void logInstall() {
  llama_log_set(onLog, nullptr);
  ggml_log_set(onLog, nullptr);
  // libmtmd (and clip) log through their own hook, to stderr unless set.
  mtmd_helper_log_set(onLog, nullptr);
}

void logSetJs(Napi::Env env, Napi::Value fn) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_tsfn) {
    g_tsfn->Release();
    g_tsfn.reset();
  }
  if (fn.IsFunction()) {
    g_tsfn = Napi::ThreadSafeFunction::New(env, fn.As<Napi::Function>(), "svc_engine_log", 0, 1);
    g_tsfn->Unref(env);  // logging alone must not keep the process alive
  }
}

void logShutdown() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_tsfn) {
    g_tsfn->Release();
    g_tsfn.reset();
  }
}

LogCapture::LogCapture() : prev_(g_capture) { g_capture = &buf_; }
LogCapture::~LogCapture() { g_capture = prev_; }
std::string LogCapture::text() const {
  std::string t = buf_;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

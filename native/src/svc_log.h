// llama.cpp / ggml log routing. Default: silent. setLogger(fn) forwards every
// line to JS through a ThreadSafeFunction (logs come from worker threads).
#pragma once

#include <napi.h>

#include <string>

void logInstall();                                  // hook llama/ggml logs (once)
void logSetJs(Napi::Env env, Napi::Value fn);      // fn or null
void logShutdown();                                 // env teardown

// Collects ERROR/WARN log text emitted on this thread while alive, so errors
// like a bad grammar can carry llama.cpp's own message.
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  std::string text() const;

 private:
  std::string buf_;
  std::string * prev_;
};

// Promise-returning AsyncWorker base: Execute() runs on the libuv pool and
// must not touch JS; Result() builds the resolved value back on the JS thread.
// With NAPI_CPP_EXCEPTIONS, a std::exception thrown by Execute() becomes a
// rejection carrying its message.
#pragma once

#include <napi.h>

#include <exception>

// Resolves `d` with result(), or rejects it with what result() throws.
template <typename F>
void settle(Napi::Env env, Napi::Promise::Deferred & d, F && result) {
  try {
    d.Resolve(result());
  } catch (const Napi::Error & e) {
    d.Reject(e.Value());
  } catch (const std::exception & e) {
    d.Reject(Napi::Error::New(env, e.what()).Value());
  }
}

class PromiseWorker : public Napi::AsyncWorker {
 public:
  PromiseWorker(Napi::Env env, const char * name)
      : Napi::AsyncWorker(env, name), deferred_(Napi::Promise::Deferred::New(env)) {}

  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  virtual Napi::Value Result(Napi::Env env) = 0;
  // Runs on the JS thread after success or failure (release busy flags here).
  virtual void Finally() {}

  void OnOK() override {
    Napi::Env env = Env();
    Finally();
    settle(env, deferred_, [&] { return Result(env); });
  }
  void OnError(const Napi::Error & e) override {
    Finally();
    deferred_.Reject(e.Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
};

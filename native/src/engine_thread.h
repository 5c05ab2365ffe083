// One long-lived thread per context runs every job that touches its
// llama_context (decode + sample, KV state reads/writes). Running them on the
// libuv pool instead hops between pool threads, and with ggml's OpenMP each
// new calling thread brings its own spinning thread team: on a small machine
// that cost more than the decode itself. Results come back to the JS thread
// through one thread-safe function.
#pragma once

#include <napi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

class EngineThread;

// A promise-returning job: Execute() on the engine thread (no JS there),
// Result() and Finally() back on the JS thread. A std::exception thrown by
// Execute() rejects the promise with its message.
class EngineJob {
 public:
  explicit EngineJob(Napi::Env env) : deferred_(Napi::Promise::Deferred::New(env)) {}
  virtual ~EngineJob() = default;
  Napi::Promise Promise() { return deferred_.Promise(); }

  virtual void Execute() = 0;
  virtual Napi::Value Result(Napi::Env env) = 0;
  virtual void Finally() {}

  void Run();                      // engine thread
  void Complete(Napi::Env env);    // JS thread
  // Microseconds the engine thread sat idle before this job (-1 for its first).
  int64_t idleUs() const { return idleUs_; }

 private:
  friend class EngineThread;
  EngineThread * owner_ = nullptr;
  Napi::Promise::Deferred deferred_;
  std::string error_;
  bool failed_ = false;
  int64_t idleUs_ = -1;
};

class EngineThread {
 public:
  // onIdle runs on the engine thread whenever a job ends with none queued.
  explicit EngineThread(Napi::Env env, std::function<void()> onIdle = {});
  ~EngineThread();
  EngineThread(const EngineThread &) = delete;
  EngineThread & operator=(const EngineThread &) = delete;

  // JS thread only. Takes ownership of the job.
  void Submit(Napi::Env env, EngineJob * job);

 private:
  void Loop();
  void Done(Napi::Env env);
  static void Deliver(Napi::Env env, Napi::Function, EngineJob * job);

  Napi::ThreadSafeFunction tsfn_;
  std::function<void()> onIdle_;
  // Set when Node finalized the thread-safe function, which it does by itself when
  // the environment is torn down (a process exiting with contexts never disposed):
  // releasing it after that locks a destroyed mutex and aborts the process.
  std::shared_ptr<std::atomic<bool>> tsfnGone_ = std::make_shared<std::atomic<bool>>(false);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<EngineJob *> queue_;
  bool stop_ = false;
  int pending_ = 0;  // JS thread only: submitted, not yet completed
  std::chrono::steady_clock::time_point lastEnd_{};  // engine thread only
  bool ran_ = false;                                  // engine thread only
  std::thread thread_;
};

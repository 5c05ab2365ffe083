#include "engine_thread.h"

#include "workers.h"

void EngineJob::Run() {
  try {
    Execute();
  } catch (const std::exception & e) {
    failed_ = true;
    error_ = e.what();
  } catch (...) {
    failed_ = true;
    error_ = "unknown native error";
  }
}

void EngineJob::Complete(Napi::Env env) {
  Napi::HandleScope scope(env);
  Finally();
  if (failed_) {
    deferred_.Reject(Napi::Error::New(env, error_).Value());
    return;
  }
  settle(env, deferred_, [&] { return Result(env); });
}

EngineThread::EngineThread(Napi::Env env, std::function<void()> onIdle) : onIdle_(std::move(onIdle)) {
  // The finalizer may run after this object is gone: it holds its own reference to the flag.
  using Flag = std::shared_ptr<std::atomic<bool>>;
  tsfn_ = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo &) {}),
                                        "svc_engine.thread", 0, 1,
                                        [](Napi::Env, Flag * gone) {
                                          gone->get()->store(true);
                                          delete gone;
                                        },
                                        new Flag(tsfnGone_));
  tsfn_.Unref(env);  // only pending jobs keep the event loop alive
  thread_ = std::thread([this] { Loop(); });
}

EngineThread::~EngineThread() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  if (!tsfnGone_->load()) tsfn_.Release();
}

void EngineThread::Submit(Napi::Env env, EngineJob * job) {
  job->owner_ = this;
  if (pending_++ == 0) tsfn_.Ref(env);
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(job);
  }
  cv_.notify_one();
}

void EngineThread::Loop() {
  for (;;) {
    EngineJob * job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop requested and nothing left
      job = queue_.front();
      queue_.pop_front();
    }
    const auto start = std::chrono::steady_clock::now();
    if (ran_) job->idleUs_ = std::chrono::duration_cast<std::chrono::microseconds>(start - lastEnd_).count();
    job->Run();
    lastEnd_ = std::chrono::steady_clock::now();
    ran_ = true;
    // Jobs hold what they touch (their context too), so they are completed and
    // freed on the JS thread; if JS is already gone the job is left behind
    // rather than freeing its context from this very thread.
    tsfn_.NonBlockingCall(job, &EngineThread::Deliver);
    if (onIdle_) {
      bool idle;
      {
        std::lock_guard<std::mutex> lk(mu_);
        idle = queue_.empty();
      }
      if (idle) onIdle_();
    }
  }
}

void EngineThread::Deliver(Napi::Env env, Napi::Function, EngineJob * job) {
  if (env == nullptr) {  // the environment is going away
    delete job;
    return;
  }
  job->Complete(env);
  job->owner_->Done(env);
  delete job;  // may free the context, and with it this thread object
}

void EngineThread::Done(Napi::Env env) {
  if (--pending_ == 0) tsfn_.Unref(env);
}

// Context::stateSeqGet / stateSeqSet: a sequence's KV state read out and
// written back, on the context's engine thread while ContextState::busy is held.
#include "context.h"
#include "svc.h"
#include "svc_log.h"

#include <cstring>
#include <string>
#include <vector>

// ---- per-sequence state ---------------------------------------------------

namespace {
class StateGetWorker : public BusyWorker {
 public:
  StateGetWorker(Napi::Env env, std::shared_ptr<ContextState> cs, llama_seq_id seq)
      : BusyWorker(env, "svc_engine.stateSeqGet", std::move(cs)), seq_(seq) {}
  void Execute() override {
    data_.resize(llama_state_seq_get_size(cs_->ctx, seq_));
    size_t n = llama_state_seq_get_data(cs_->ctx, data_.data(), data_.size(), seq_);
    data_.resize(n);
  }
  Napi::Value Result(Napi::Env env) override {
    return Napi::Buffer<uint8_t>::Copy(env, data_.data(), data_.size());
  }

 private:
  llama_seq_id seq_;
  std::vector<uint8_t> data_;
};

class StateSetWorker : public BusyWorker {
 public:
  StateSetWorker(Napi::Env env, std::shared_ptr<ContextState> cs, llama_seq_id seq, std::vector<uint8_t> data)
      : BusyWorker(env, "svc_engine.stateSeqSet", std::move(cs)), seq_(seq), data_(std::move(data)) {}
  void Execute() override {
    if (!plausibleCellCount()) return;  // refused: read_ stays 0
    LogCapture cap;  // the one way llama.cpp tells "no room" from "not a state of this cache"
    read_ = llama_state_seq_set_data(cs_->ctx, data_.data(), data_.size(), seq_);
    noRoom_ = read_ == 0 && cap.text().find("failed to find") != std::string::npos && cap.text().find("available cells") != std::string::npos;
  }
  // Bytes read; 0 when llama.cpp refused the state; -1 when it had no free cells for it.
  Napi::Value Result(Napi::Env env) override { return Napi::Number::New(env, noRoom_ ? -1.0 : (double) read_); }

 private:
  llama_seq_id seq_;
  std::vector<uint8_t> data_;
  size_t read_ = 0;
  bool noRoom_ = false;

  // llama.cpp sizes a batch by the state's first cell count before reading any cell: a damaged
  // or forged count (4e9) had the engine thread zero gigabytes and hang. A sequence never holds
  // more cells than the context has positions, and each cell takes at least 8 bytes.
  // Layout: magic u32, seq i32, then a KV cache's stream count u32 and cell count u32 (a purely
  // recurrent memory writes its cell count straight after the seq id).
  bool plausibleCellCount() const {
    const bool recurrent = llama_model_is_recurrent(llama_get_model(cs_->ctx));
    const size_t at = recurrent ? 8 : 12;
    if (data_.size() < at + 4) return true;  // too short to reserve anything: llama.cpp refuses it
    uint32_t cells = 0;
    std::memcpy(&cells, data_.data() + at, 4);
    if (!recurrent) {
      uint32_t streams = 0;
      std::memcpy(&streams, data_.data() + 8, 4);
      if (streams == 0) return true;
    }
    return cells <= llama_n_ctx(cs_->ctx) && (uint64_t) cells * 8 <= data_.size() - at - 4;
  }
};

llama_seq_id seqArg(const Napi::CallbackInfo & info, const ContextState & st) {
  if (info.Length() < 1 || !info[0].IsNumber()) throwType(info.Env(), "seq must be a number");
  int32_t s = info[0].As<Napi::Number>().Int32Value();
  if (s < 0 || s >= st.nSeqMax) throwRange(info.Env(), "seq " + std::to_string(s) + " out of range");
  return s;
}
}  // namespace

Napi::Value Context::StateSeqGet(const Napi::CallbackInfo & info) {
  auto st = state(info.Env());
  auto * w = new StateGetWorker(info.Env(), st, seqArg(info, *st));
  return w->Queue(info.Env());
}

Napi::Value Context::StateSeqSet(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  auto st = state(env);
  llama_seq_id seq = seqArg(info, *st);
  if (info.Length() < 2 || !info[1].IsBuffer()) throwType(env, "stateSeqSet(seq, data): data must be a Buffer");
  auto buf = info[1].As<Napi::Buffer<uint8_t>>();
  std::vector<uint8_t> data(buf.Data(), buf.Data() + buf.Length());
  auto * w = new StateSetWorker(env, st, seq, std::move(data));
  return w->Queue(env);
}

#include "sampler.h"

#include "chat_prompt.h"
#include "json-schema-to-grammar.h"
#include "model.h"
#include "svc.h"
#include "svc_log.h"

#include <algorithm>
#include <cmath>

// The think block's tags, as tools/server passes them (server-common.cpp "reasoning_budget_*"):
// llama.cpp's budget sampler then ends the block after `budget` tokens of thought (-1: never),
// and keeps a lazy tool grammar from triggering inside the thoughts. The generation prompt is
// fed to it first, so a block the prompt opened counts as open.
static void applyThinking(common_params_sampling & sp, const ChatPromptState & chat, const llama_vocab * vocab, int32_t budget) {
  const auto & cp = chat.params;
  if (cp.thinking_start_tag.empty() || cp.thinking_end_tags.empty()) return;
  sp.generation_prompt = cp.generation_prompt;
  sp.reasoning_budget_start = common_tokenize(vocab, cp.thinking_start_tag, false, true);
  sp.reasoning_budget_end.clear();
  for (const auto & tag : cp.thinking_end_tags) {
    if (!tag.empty()) sp.reasoning_budget_end.push_back(common_tokenize(vocab, tag, false, true));
  }
  if (!sp.reasoning_budget_end.empty()) sp.reasoning_budget_forced = sp.reasoning_budget_end.front();
  sp.reasoning_budget_tokens = budget;
}

// Grammar triggers / preserved tokens from chat params, converted exactly as
// tools/server does (server-schema.cpp "preserved_tokens"/"grammar_triggers").
static void applyChat(common_params_sampling & sp, const ChatPromptState & chat, const llama_vocab * vocab) {
  const auto & cp = chat.params;
  sp.generation_prompt = cp.generation_prompt;
  applyThinking(sp, chat, vocab, -1);
  if (cp.grammar.empty()) return;
  sp.grammar = common_grammar(COMMON_GRAMMAR_TYPE_TOOL_CALLS, cp.grammar);
  sp.grammar_lazy = cp.grammar_lazy;
  for (const auto & t : cp.preserved_tokens) {
    auto ids = common_tokenize(vocab, t, false, true);
    if (ids.size() == 1) sp.preserved_tokens.insert(ids[0]);
  }
  for (const auto & trig : cp.grammar_triggers) {
    if (trig.type == COMMON_GRAMMAR_TRIGGER_TYPE_WORD) {
      auto ids = common_tokenize(vocab, trig.value, false, true);
      if (ids.size() == 1) {
        if (!sp.preserved_tokens.count(ids[0])) {
          throw std::runtime_error("Grammar trigger word should be marked as preserved token: " + trig.value);
        }
        common_grammar_trigger t;
        t.type = COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN;
        t.value = trig.value;
        t.token = ids[0];
        sp.grammar_triggers.push_back(std::move(t));
      } else {
        sp.grammar_triggers.push_back({COMMON_GRAMMAR_TRIGGER_TYPE_WORD, trig.value});
      }
    } else {
      sp.grammar_triggers.push_back(trig);
    }
  }
  if (sp.grammar_lazy && sp.grammar_triggers.empty()) throw std::runtime_error("no triggers set for lazy grammar");
}

// llama.cpp's grammar parser adds max - min optional copies of a repeated item, counting in
// unsigned integers: {5,2} asks for 2^64 - 3 of them, and the process grows by gigabytes a second
// on the JS thread until the machine runs out of memory. Such a repetition comes from a grammar
// as written, or from a schema (minLength above maxLength, a pattern's quantifier, tool
// parameters) through llama.cpp's converter. Returns the first one ("" if none), skipping
// literals, character classes and comments.
static std::string invertedRepetition(const std::string & g) {
  const size_t n = g.size();
  // Every digit is read (leading zeros skipped, as stoull reads them), saturating: a cap at 18
  // characters let {5,0000000000000000002} through. Inside braces llama.cpp also skips newlines
  // and comments, so they are skipped here too.
  auto digits = [&](size_t & j, uint64_t & v) {
    const size_t from = j;
    v = 0;
    for (; j < n && g[j] >= '0' && g[j] <= '9'; j++) v = v > UINT64_MAX / 16 ? UINT64_MAX / 16 : v * 10 + (uint64_t) (g[j] - '0');
    return j > from;
  };
  auto spaces = [&](size_t & j) {
    while (j < n) {
      if (g[j] == ' ' || g[j] == '\t' || g[j] == '\r' || g[j] == '\n') j++;
      else if (g[j] == '#') {
        while (j < n && g[j] != '\n') j++;
      } else break;
    }
  };
  for (size_t i = 0; i < n; i++) {
    const char c = g[i];
    if (c == '"' || c == '[') {
      const char close = c == '"' ? '"' : ']';
      for (i++; i < n && g[i] != close; i++) {
        if (g[i] == '\\') i++;
      }
    } else if (c == '#') {
      while (i < n && g[i] != '\n') i++;
    } else if (c == '{') {
      size_t j = i + 1;
      uint64_t lo = 0, hi = 0;
      spaces(j);
      if (!digits(j, lo)) continue;
      spaces(j);
      if (j >= n || g[j] != ',') continue;
      j++;
      spaces(j);
      if (!digits(j, hi)) continue;
      spaces(j);
      if (j < n && g[j] == '}' && lo > hi) return g.substr(i, j - i + 1);
    }
  }
  return "";
}

Napi::Value createSampler(Napi::Env env, const std::shared_ptr<ModelState> & model, const Napi::Value & optsV, int32_t n_ctx,
                          bool backend) {
  Napi::Object o = optsV.IsObject() ? optsV.As<Napi::Object>() : Napi::Object::New(env);
  const llama_vocab * vocab = model->vocab;
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);

  // Struct defaults are llama-server's: top_k 40, top_p 0.95, min_p 0.05,
  // typical 1, penalties off (last_n 64), DRY off, random seed.
  common_params_sampling sp;
  sp.no_perf = true;
  sp.temp = (float) optNumber(o, "temperature", sp.temp);  // <= 0: temp sampler keeps only the argmax
  {
    // Past the vocabulary (or INT32_MAX) top-k keeps everything: the cast of 1e10 was undefined.
    const double k = optNumber(o, "topK", sp.top_k);
    sp.top_k = std::isnan(k) ? sp.top_k : k > n_vocab ? n_vocab : k < INT32_MIN ? -1 : (int32_t) k;
  }
  sp.top_p = (float) optNumber(o, "topP", sp.top_p);
  sp.min_p = (float) optNumber(o, "minP", sp.min_p);
  sp.typ_p = (float) optNumber(o, "typicalP", sp.typ_p);
  if (hasOpt(o, "seed")) {
    // The engine library passes 0 .. 2^32 - 2 (LLAMA_DEFAULT_SEED, 2^32 - 1, means a random one).
    const double seed = optNumber(o, "seed", 0);
    if (!(seed >= 0 && seed < LLAMA_DEFAULT_SEED) || seed != std::floor(seed)) throwRange(env, "seed out of range");
    sp.seed = (uint32_t) seed;
  }
  sp.penalty_repeat = (float) optNumber(o, "repeatPenalty", sp.penalty_repeat);
  // Windows are held to the context (-1, or anything past it, is the whole context: llama.cpp's
  // CLI convention): each sampler allocates its window up front, 2e9 was 8 GB on the JS thread.
  const auto window = [&](const char * key, int32_t def) {
    const double v = optNumber(o, key, def);
    return v < 0 || v > n_ctx || std::isnan(v) ? n_ctx : (int32_t) v;
  };
  sp.penalty_last_n = window("repeatLastN", sp.penalty_last_n);
  sp.penalty_freq = (float) optNumber(o, "frequencyPenalty", sp.penalty_freq);
  sp.penalty_present = (float) optNumber(o, "presencePenalty", sp.penalty_present);
  sp.dry_multiplier = (float) optNumber(o, "dryMultiplier", sp.dry_multiplier);
  sp.dry_base = (float) optNumber(o, "dryBase", sp.dry_base);
  {
    const double len = optNumber(o, "dryAllowedLength", sp.dry_allowed_length);
    sp.dry_allowed_length = std::isnan(len) ? sp.dry_allowed_length : len > INT32_MAX ? INT32_MAX : len < 0 ? 0 : (int32_t) len;
  }
  sp.dry_penalty_last_n = window("dryPenaltyLastN", sp.dry_penalty_last_n);
  sp.ignore_eos = optBool(o, "ignoreEos", false);

  if (hasOpt(o, "logitBias")) {
    Napi::Value lb = o.Get("logitBias");
    if (!lb.IsArray()) throwType(env, "logitBias must be an array of [token, bias] pairs");
    auto arr = lb.As<Napi::Array>();
    for (uint32_t i = 0; i < arr.Length(); i++) {
      Napi::Value pair = arr.Get(i);
      if (!pair.IsArray() || pair.As<Napi::Array>().Length() != 2) throwType(env, "logitBias entries must be [token, bias]");
      auto p = pair.As<Napi::Array>();
      if (!p.Get(0u).IsNumber() || !p.Get(1u).IsNumber()) throwType(env, "logitBias entries must be [token, bias]");
      // Read as a double: Int32Value wraps 2^32 + 300 to token 300.
      const double id = p.Get(0u).As<Napi::Number>().DoubleValue();
      if (!(id >= 0 && id < n_vocab) || id != std::floor(id)) {
        throwRange(env, "token " + Napi::Number::New(env, id).ToString().Utf8Value() + " (logit_bias or svc_banned_tokens) is not in the vocabulary (ids 0 to " + std::to_string(n_vocab - 1) + ")");
      }
      const int32_t tok = (int32_t) id;
      sp.logit_bias.push_back({tok, (float) p.Get(1u).As<Napi::Number>().DoubleValue()});
    }
  }
  // ignore_eos: ban every end-of-generation token (common.cpp / server do the same).
  if (sp.ignore_eos && llama_vocab_eos(vocab) != LLAMA_TOKEN_NULL) {
    for (llama_token t : model->eogTokens) sp.logit_bias.push_back({t, -INFINITY});
  }

  const bool hasGrammar = hasOpt(o, "grammar"), hasSchema = hasOpt(o, "jsonSchema");
  if (hasGrammar && hasSchema) throwType(env, "grammar and jsonSchema are mutually exclusive");
  try {
    if (hasOpt(o, "chat")) applyChat(sp, *unwrapChatPrompt(o.Get("chat")), vocab);
    if (hasOpt(o, "thinkingOf")) {
      const double budget = optNumber(o, "thinkingBudget", -1);
      if (!(budget >= -1 && budget <= INT32_MAX) || budget != std::floor(budget)) throwRange(env, "thinkingBudget must be an integer from -1");
      applyThinking(sp, *unwrapChatPrompt(o.Get("thinkingOf")), vocab, (int32_t) budget);
    }
  } catch (const Napi::Error &) {
    throw;
  } catch (const std::exception & e) {
    throwError(env, e.what());
  }
  // An explicit grammar / schema replaces the chat prompt's grammar.
  if (hasGrammar) {
    sp.grammar = common_grammar(COMMON_GRAMMAR_TYPE_USER, optString(o, "grammar", ""));
    sp.grammar_lazy = false;
    sp.grammar_triggers.clear();
  } else if (hasSchema) {
    try {
      sp.grammar = common_grammar(COMMON_GRAMMAR_TYPE_OUTPUT_FORMAT,
                                  json_schema_to_grammar(common_json::parse(optString(o, "jsonSchema", ""))));
    } catch (const std::exception & e) {
      throwError(env, std::string("invalid JSON schema: ") + e.what());
    }
    sp.grammar_lazy = false;
    sp.grammar_triggers.clear();
  }

  const std::string inverted = invertedRepetition(sp.grammar.grammar);
  if (!inverted.empty()) {
    const std::string what = "the repetition " + inverted + " has its minimum above its maximum";
    if (sp.grammar.type == COMMON_GRAMMAR_TYPE_USER) throwError(env, "invalid grammar: " + what);
    if (sp.grammar.type == COMMON_GRAMMAR_TYPE_OUTPUT_FORMAT) {
      throwError(env, "invalid JSON schema: " + what + " (a minLength above maxLength, minItems above maxItems, or such a pattern quantifier)");
    }
    throwError(env, "invalid tool parameters: " + what + " (a minLength above maxLength, minItems above maxItems, or such a pattern quantifier)");
  }

  sp.backend_sampling = backend;  // common_sampler_init turns it off for a grammar
  common_sampler * smpl = nullptr;
  {
    LogCapture cap;  // the grammar parser explains failures via the log
    std::string err;
    try {
      smpl = common_sampler_init(model->model, sp);
    } catch (const std::exception & e) {
      err = e.what();
    }
    if (!smpl) {
      std::string detail = cap.text();
      if (detail.empty()) detail = err.empty() ? "failed to initialise sampler" : err;
      bool grammarish = !sp.grammar.grammar.empty();
      throwError(env, (grammarish ? "invalid grammar: " : "invalid sampler options: ") + detail);
    }
  }
  auto st = std::make_shared<SamplerState>();
  st->model = model;
  st->smpl = smpl;
  st->backend = sp.backend_sampling;
  if (st->backend) {  // only a graph-sampled chain is ever compared (graph_sampling.cpp)
    st->config = sp.print();
    for (const auto & b : sp.logit_bias) st->config += "|" + std::to_string(b.token) + ":" + std::to_string(b.bias);
  }
  static std::atomic<uint64_t> nextId{1};
  st->id = nextId++;
  auto ext = Napi::External<std::shared_ptr<SamplerState>>::New(env, &st);
  return addonData(env).sampler.New({ext});
}

Napi::Function Sampler::Define(Napi::Env env) {
  return DefineClass(env, "NativeSampler", {
    InstanceMethod<&Sampler::AcceptPrompt>("acceptPrompt"),
    InstanceMethod<&Sampler::Dispose>("dispose"),
    InstanceMethod<&Sampler::Reset>("reset"),
  });
}

Sampler::Sampler(const Napi::CallbackInfo & info) : Napi::ObjectWrap<Sampler>(info) {
  if (info.Length() < 1 || !info[0].IsExternal()) throwType(info.Env(), "NativeSampler is created by context.createSampler()");
  st_ = *info[0].As<Napi::External<std::shared_ptr<SamplerState>>>().Data();
  Value().TypeTag(&kTagSampler);
}

std::shared_ptr<SamplerState> Sampler::state(Napi::Env env) const {
  if (!st_) throwError(env, "sampler is disposed");
  return st_;
}

Napi::Value Sampler::AcceptPrompt(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  auto st = state(env);
  if (st->inStep) throwError(env, "sampler is in use by a step() in flight");
  if (info.Length() < 1 || !info[0].IsTypedArray() ||
      info[0].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    throwType(env, "acceptPrompt(tokens): tokens must be an Int32Array");
  }
  auto a = info[0].As<Napi::Int32Array>();
  const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(st->model->model));
  for (size_t i = 0; i < a.ElementLength(); i++) {
    if (a[i] < 0 || a[i] >= n_vocab) throwRange(env, "token id " + std::to_string(a[i]) + " out of range");
  }
  // is_generated=false: penalty history only, the grammar is not advanced.
  for (size_t i = 0; i < a.ElementLength(); i++) common_sampler_accept(st->smpl, a[i], false);
  st->version++;
  return env.Undefined();
}

void Sampler::Dispose(const Napi::CallbackInfo &) {
  st_.reset();  // an in-flight step keeps its own reference; freed after it
}

// Back to a new sampler's state for reuse: penalty history cleared, RNG reseeded
// from the seed it was made with (a fresh random one when none was given). The
// grammar is not reset here, so samplers with one are never reused (JS decides).
void Sampler::Reset(const Napi::CallbackInfo & info) {
  auto st = state(info.Env());
  if (st->inStep) throwError(info.Env(), "sampler is in use by a step() in flight");
  common_sampler_reset(st->smpl);
  st->version++;
}

void freeCommonSampler(common_sampler * s) { common_sampler_free(s); }

std::shared_ptr<SamplerState> unwrapSampler(const Napi::Value & v) {
  if (!hasTag(v, kTagSampler)) throwType(v.Env(), "sampler must be a NativeSampler");
  return Sampler::Unwrap(v.As<Napi::Object>())->state(v.Env());
}

#include "chat_prompt.h"

#include "model.h"
#include "svc.h"
#include "common.h"

#include <regex>
#include <stdexcept>

// Per-call formats wrap calls in one_or_more(...) whatever parallel_tool_calls
// says (tool-calls ::= (tool-call space)+): with parallel calls off, allow one.
static std::string singleCall(const std::string & grammar) {
  static const std::regex manyCalls(R"((^|\n)(tool-calls ::= )\((tool-call space)\)\+(\n|$))");
  return std::regex_replace(grammar, manyCalls, "$1$2$3$4");
}

// llama.cpp's "required" tool grammar still lets the model write free text
// before the call marker (root ::= ... until-N? tool-calls, or a required
// until-N before tool-call-root after a think block). A weak model may then
// never reach the marker, so a forced call would never come: drop that content
// term from the root rule so the call starts at once (after the thoughts, if any).
static std::string requireCallFirst(const std::string & grammar) {
  static const std::regex rootLine(R"((^|\n)root ::= [^\n]*)");
  static const std::regex contentTerm(R"(\s+until-[0-9]+\??(?=\s+(space\s+)?tool-call))");
  std::smatch m;
  if (!std::regex_search(grammar, m, rootLine)) return grammar;
  std::string line = m.str(0);
  if (line.find("tool-call") == std::string::npos) return grammar;
  std::string tight = std::regex_replace(line, contentTerm, "");
  if (tight == line) return grammar;
  return grammar.substr(0, m.position(0)) + tight + grammar.substr(m.position(0) + m.length(0));
}

static std::string jsonStringify(Napi::Env env, const Napi::Value & v) {
  auto JSON = env.Global().Get("JSON").As<Napi::Object>();
  auto s = JSON.Get("stringify").As<Napi::Function>().Call(JSON, {v});
  if (!s.IsString()) throwType(env, "value is not JSON-serialisable");
  return s.As<Napi::String>().Utf8Value();
}

Napi::Value applyChatTemplate(const Napi::CallbackInfo & info, const std::shared_ptr<ModelState> & model) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) throwType(env, "applyChatTemplate(input): input must be an object");
  auto in = info[0].As<Napi::Object>();
  if (!in.Get("messages").IsArray()) throwType(env, "applyChatTemplate: messages must be an array");

  auto st = std::make_shared<ChatPromptState>();
  try {
    // Same steps as tools/server (oaicompat_chat_params_parse in server-common.cpp).
    common_chat_templates_inputs inputs;
    inputs.use_jinja = true;
    inputs.messages = common_chat_msgs_parse_oaicompat(common_json::parse(jsonStringify(env, in.Get("messages"))));
    if (hasOpt(in, "tools")) {
      if (!in.Get("tools").IsArray()) throwType(env, "applyChatTemplate: tools must be an array");
      inputs.tools = common_chat_tools_parse_oaicompat(common_json::parse(jsonStringify(env, in.Get("tools"))));
    }
    // The tools as the grammar enforces them (svc's schema rewrite), where they differ from those shown.
    std::vector<common_chat_tool> grammarTools;
    const bool ownGrammarTools = hasOpt(in, "grammarTools");
    if (ownGrammarTools) {
      if (!in.Get("grammarTools").IsArray()) throwType(env, "applyChatTemplate: grammarTools must be an array");
      grammarTools = common_chat_tools_parse_oaicompat(common_json::parse(jsonStringify(env, in.Get("grammarTools"))));
    }
    if (hasOpt(in, "toolChoice")) {
      inputs.tool_choice = common_chat_tool_choice_parse_oaicompat(optString(in, "toolChoice", "auto"));
    }
    inputs.json_schema = optString(in, "jsonSchema", "");
    inputs.grammar = optString(in, "grammar", "");
    if (!inputs.tools.empty() && inputs.tool_choice != COMMON_CHAT_TOOL_CHOICE_NONE && !inputs.grammar.empty()) {
      throw std::invalid_argument("Cannot use custom grammar constraints with tools.");
    }

    const auto * tmpls = model->templates(optString(in, "templateOverride", ""));
    auto caps = common_chat_templates_get_caps(tmpls);
    st->supportsTools = caps["supports_tools"];
    inputs.parallel_tool_calls = optBool(in, "parallelToolCalls", caps["supports_parallel_tool_calls"]);

    const bool cont = optBool(in, "continueFinalMessage", false);
    inputs.add_generation_prompt = optBool(in, "addGenerationPrompt", !cont);
    if (cont) {
      if (inputs.add_generation_prompt) {
        throw std::invalid_argument("Cannot set both add_generation_prompt and continue_final_message to true.");
      }
      if (!inputs.messages.empty() && inputs.messages.back().role == "assistant" &&
          !inputs.messages.back().tool_calls.empty()) {
        throw std::invalid_argument("Cannot continue an assistant message that contains tool calls.");
      }
      inputs.continue_final_message = COMMON_CHAT_CONTINUATION_AUTO;
    }
    // llama-server's defaults: reasoning extracted into reasoning_content, thinking on.
    const bool split = optBool(in, "splitReasoning", true);
    const auto reasoning = split ? COMMON_REASONING_FORMAT_DEEPSEEK : COMMON_REASONING_FORMAT_NONE;
    inputs.reasoning_format = reasoning;
    inputs.enable_thinking = optBool(in, "enableThinking", true);
    if (hasOpt(in, "templateKwargs")) {
      // Extra template variables, as llama-server's chat_template_kwargs: each value as JSON text.
      auto kw = common_json::parse(jsonStringify(env, in.Get("templateKwargs")));
      if (!kw.is_object()) throwType(env, "applyChatTemplate: templateKwargs must be an object");
      for (const auto & item : kw.items()) inputs.chat_template_kwargs[item.key()] = item.value().dump();
    }

    if (ownGrammarTools) {
      // The grammar and parser from the enforced tools, the prompt from the tools as sent: the
      // model reads the caller's schemas, not their rewrite.
      auto enforced = inputs;
      enforced.tools = grammarTools;
      const std::string shown = common_chat_templates_apply(tmpls, inputs).prompt;
      st->params = common_chat_templates_apply(tmpls, enforced);
      st->params.prompt = shown;
      inputs = enforced;
    } else {
      st->params = common_chat_templates_apply(tmpls, inputs);
    }
    auto readAs = reasoning;
    if (!split && !st->params.grammar.empty() && !st->params.grammar_lazy && !st->params.thinking_start_tag.empty()) {
      // reasoning_format none only says where the thoughts go: the model still thinks first. llama.cpp
      // builds that format's grammar and parser without the think block the generation prompt
      // opened (the sampler, fed that prompt first, failed: "std::exception"; the parser could not
      // read the output): the split format's, with the thoughts put back in front (Parse).
      inputs.reasoning_format = readAs = COMMON_REASONING_FORMAT_DEEPSEEK;
      const std::string shown = st->params.prompt;
      st->params = common_chat_templates_apply(tmpls, inputs);
      st->params.prompt = shown;
      st->thoughtsInContent = true;
    }
    if (inputs.tool_choice == COMMON_CHAT_TOOL_CHOICE_REQUIRED && !st->params.grammar_lazy) {
      st->params.grammar = requireCallFirst(st->params.grammar);
    }
    if (!inputs.parallel_tool_calls) st->params.grammar = singleCall(st->params.grammar);

    // Parser params as server-schema.cpp builds them from the chat params.
    st->parser = common_chat_parser_params(st->params);
    st->parser.reasoning_format = readAs;
    st->parser.reasoning_in_content = false;
    st->parser.parse_tool_calls = true;
    st->parser.is_continuation = cont;
    if (!st->params.parser.empty()) st->parser.parser.load(st->params.parser);
    // Tokens the format's markers are made of: rendered as text in the output, as
    // llama-server does, or a parser would never see a marker that is a control token.
    for (const auto & t : st->params.preserved_tokens) {
      auto ids = common_tokenize(model->vocab, t, false, true);
      if (ids.size() == 1) st->preservedTokens.push_back(ids[0]);
    }
  } catch (const Napi::Error &) {
    throw;
  } catch (const std::exception & e) {
    throwError(env, e.what());
  }

  std::shared_ptr<const ChatPromptState> cst = st;
  auto ext = Napi::External<std::shared_ptr<const ChatPromptState>>::New(env, &cst);
  return addonData(env).chatPrompt.New({ext});
}

Napi::Function ChatPrompt::Define(Napi::Env env) {
  return DefineClass(env, "NativeChatPrompt", {InstanceMethod<&ChatPrompt::Parse>("parse")});
}

ChatPrompt::ChatPrompt(const Napi::CallbackInfo & info) : Napi::ObjectWrap<ChatPrompt>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsExternal()) throwType(env, "NativeChatPrompt is created by applyChatTemplate()");
  st_ = *info[0].As<Napi::External<std::shared_ptr<const ChatPromptState>>>().Data();
  Value().TypeTag(&kTagChatPrompt);
  const auto & p = st_->params;
  auto stops = Napi::Array::New(env, p.additional_stops.size());
  for (size_t i = 0; i < p.additional_stops.size(); i++) stops.Set((uint32_t) i, p.additional_stops[i]);
  auto self = Value();
  auto ro = [&](const char * k, Napi::Value v) {
    self.DefineProperty(Napi::PropertyDescriptor::Value(k, v, napi_enumerable));
  };
  ro("prompt", Napi::String::New(env, p.prompt));
  ro("format", Napi::String::New(env, common_chat_format_name(p.format)));
  ro("grammar", Napi::String::New(env, p.grammar));
  ro("grammarLazy", Napi::Boolean::New(env, p.grammar_lazy));
  ro("additionalStops", stops);
  ro("generationPrompt", Napi::String::New(env, p.generation_prompt));
  ro("supportsTools", Napi::Boolean::New(env, st_->supportsTools));
  ro("supportsThinking", Napi::Boolean::New(env, p.supports_thinking));
  auto preserved = Napi::Int32Array::New(env, st_->preservedTokens.size());
  for (size_t i = 0; i < st_->preservedTokens.size(); i++) preserved[i] = st_->preservedTokens[i];
  ro("preservedTokens", preserved);
  // What starts a call under a lazy grammar: the output from there on is call syntax.
  auto triggers = Napi::Array::New(env, p.grammar_triggers.size());
  for (size_t i = 0; i < p.grammar_triggers.size(); i++) {
    const auto & t = p.grammar_triggers[i];
    auto o = Napi::Object::New(env);
    const char * kind = t.type == COMMON_GRAMMAR_TRIGGER_TYPE_WORD ? "word"
                      : t.type == COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN ? "pattern"
                      : t.type == COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL ? "pattern_full" : "token";
    o.Set("kind", kind);
    o.Set("value", t.value);
    triggers.Set((uint32_t) i, o);
  }
  ro("callTriggers", triggers);
  ro("thinkingStartTag", Napi::String::New(env, p.thinking_start_tag));
  auto ends = Napi::Array::New(env, p.thinking_end_tags.size());
  for (size_t i = 0; i < p.thinking_end_tags.size(); i++) ends.Set((uint32_t) i, p.thinking_end_tags[i]);
  ro("thinkingEndTags", ends);
}

// reasoning_format none, as its own parser writes it: the think block (the tag the generation
// prompt opened, as that prompt wrote it) and its end tag when the output has one, then the answer.
static void thoughtsInFront(common_chat_msg & msg, const std::string & text, const common_chat_params & p) {
  const std::string & gen = p.generation_prompt;
  const size_t at = gen.rfind(p.thinking_start_tag);
  const bool opened = at != std::string::npos && gen.find_first_not_of(" \t\n", at + p.thinking_start_tag.size()) == std::string::npos;
  if (!opened && msg.reasoning_content.empty()) return;
  std::string end;
  for (const auto & tag : p.thinking_end_tags) {
    if (!tag.empty() && text.find(tag) != std::string::npos) {
      end = tag;
      break;
    }
  }
  msg.content = (opened ? gen.substr(at) : p.thinking_start_tag) + msg.reasoning_content + end + msg.content;
  msg.reasoning_content.clear();
}

Napi::Value ChatPrompt::Parse(const Napi::CallbackInfo & info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throwType(env, "parse(text, partial): text must be a string");
  std::string text = info[0].As<Napi::String>().Utf8Value();
  bool partial = info.Length() > 1 && info[1].ToBoolean().Value();
  common_chat_msg msg;
  try {
    msg = common_chat_parse(text, partial, st_->parser);
  } catch (const std::exception & e) {
    throwError(env, e.what());
  }
  if (st_->thoughtsInContent) thoughtsInFront(msg, text, st_->params);
  auto out = Napi::Object::New(env);
  out.Set("content", msg.content);
  out.Set("reasoningContent", msg.reasoning_content);
  auto calls = Napi::Array::New(env, msg.tool_calls.size());
  for (size_t i = 0; i < msg.tool_calls.size(); i++) {
    auto c = Napi::Object::New(env);
    c.Set("id", msg.tool_calls[i].id);
    c.Set("name", msg.tool_calls[i].name);
    c.Set("arguments", msg.tool_calls[i].arguments);
    calls.Set((uint32_t) i, c);
  }
  out.Set("toolCalls", calls);
  return out;
}

std::shared_ptr<const ChatPromptState> unwrapChatPrompt(const Napi::Value & v) {
  if (!hasTag(v, kTagChatPrompt)) throwType(v.Env(), "chat must be a NativeChatPrompt from applyChatTemplate()");
  return ChatPrompt::Unwrap(v.As<Napi::Object>())->state();
}

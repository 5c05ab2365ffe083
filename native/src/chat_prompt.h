// NativeChatPrompt: common_chat_templates_apply() result plus the parser
// params needed to turn generated text back into content / tool calls.
#pragma once

#include <napi.h>

#include "chat.h"  // llama.cpp common/chat.h

#include <memory>
#include <vector>

struct ModelState;

struct ChatPromptState {
  common_chat_params params;
  common_chat_parser_params parser;  // mirrors tools/server's per-task parser params
  bool supportsTools = false;         // the template renders tool definitions (llama.cpp's caps probe)
  std::vector<int32_t> preservedTokens;  // single-token format markers, shown as text in the output
  bool thoughtsInContent = false;     // reasoning_format none read by the split format: thoughts go back in front
};

class ChatPrompt : public Napi::ObjectWrap<ChatPrompt> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit ChatPrompt(const Napi::CallbackInfo & info);
  std::shared_ptr<const ChatPromptState> state() const { return st_; }

 private:
  Napi::Value Parse(const Napi::CallbackInfo & info);
  std::shared_ptr<const ChatPromptState> st_;
};

// model.applyChatTemplate(input)
Napi::Value applyChatTemplate(const Napi::CallbackInfo & info, const std::shared_ptr<ModelState> & model);

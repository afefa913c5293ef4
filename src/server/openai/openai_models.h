// Which repository models the OpenAI routes serve, and what each needs beside the model itself: its
// tokenizer (to count tokens), chat templates and the engine's max_seq_len.
//
// A model is served when its inputs include text_input and max_tokens and its outputs text_output
// (the ensemble of all_models/inflight_batcher_llm, or anything with its interface), and a
// tokenizer_dir parameter is found on it or on a model of its ensemble steps (preprocessing).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/openai/chat_template.h"
#include "server/server_api.h"
#include "tokenizer/tokenizer.h"

namespace inflight::server::openai {

struct OpenAiModel {
  std::string name;
  bool batching = false;  // max_batch_size > 0: inputs carry a batch dim
  std::string tokenizer_dir;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  bool add_special_tokens = true;  // the preprocessing model's add_special_tokens
  std::shared_ptr<const ChatTemplateSet> chat;
  std::optional<std::int64_t> max_seq_len;  // from the engine's config.json, when found
};

class OpenAiModels {
 public:
  explicit OpenAiModels(const Server& server) : server_(server) {}

  // Names of READY models that the routes serve.
  std::vector<std::string> List();
  // kNotFound when `name` is not a READY model the routes serve (the message says why).
  Result<std::shared_ptr<const OpenAiModel>> Resolve(const std::string& name);

 private:
  struct TokenizerFiles {
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
    std::shared_ptr<const ChatTemplateSet> chat;
  };
  Result<TokenizerFiles> LoadTokenizer(const std::string& dir);

  const Server& server_;
  std::mutex mu_;
  std::map<std::string, TokenizerFiles> tokenizers_;  // by tokenizer_dir: loaded once
};

}  // namespace inflight::server::openai

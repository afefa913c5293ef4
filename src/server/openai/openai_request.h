// The bodies of POST /v1/completions and /v1/chat/completions, read into what the ensemble needs.
// Every field OpenAI defines is either honoured, accepted because it cannot change the output
// (`user`, `metadata`, ...), or refused by name when it would change the output and we cannot do
// what it asks (n > 1, echo, logit_bias, tools, ...). A field OpenAI does not define is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai/openai_errors.h"

namespace inflight::server::openai {

struct GenerationSettings {
  std::optional<std::int64_t> max_tokens;  // unset: the endpoint's default
  double temperature = 1.0;                // OpenAI's default; 0 is greedy
  double top_p = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::vector<std::string> stop;  // at most 4, none empty
  std::optional<std::uint64_t> seed;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // the chosen tokens' log-probs (no alternatives)
};

struct CompletionRequest {
  std::string model;
  std::string prompt;
  GenerationSettings settings;
};

struct ChatRequest {
  std::string model;
  // Messages as the chat template gets them: content parts joined into a string, "developer"
  // read as "system"; other keys (name, tool_calls, tool_call_id) passed through in client order.
  nlohmann::ordered_json messages;
  GenerationSettings settings;
};

std::optional<OpenAiError> ParseCompletionRequest(const nlohmann::ordered_json& body,
                                                  CompletionRequest* out);
std::optional<OpenAiError> ParseChatRequest(const nlohmann::ordered_json& body, ChatRequest* out);

}  // namespace inflight::server::openai

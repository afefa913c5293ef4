// Writes a generation to the client in OpenAI's shapes: one JSON body (text_completion /
// chat.completion) or Server-Sent Events (`data: {chunk}` ... `data: [DONE]`) with
// text_completion / chat.completion.chunk chunks, usage where asked for.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/openai/openai_generation.h"

namespace inflight::server::openai {

enum class ApiKind { kCompletion, kChat };

struct ResponseOptions {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  std::int64_t prompt_tokens = 0;
};

class ResponseWriter : public GenerationObserver {
 public:
  // For a stream: sends the SSE head (and a chat stream's opening role chunk). Call on the
  // connection's strand once the core took the request, so that a refusal is still a plain error.
  virtual void Begin() = 0;
};

std::shared_ptr<ResponseWriter> MakeResponseWriter(ResponseOptions options,
                                                   std::shared_ptr<http::HttpExchange> exchange);

}  // namespace inflight::server::openai

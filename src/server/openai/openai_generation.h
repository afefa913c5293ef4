// One OpenAI request's generation: an inference request to the model's ensemble (text_input,
// max_tokens, sampling inputs, stop_words, return_log_probs → text_output, output_log_probs),
// whose responses become pieces of text with their tokens' log-probs, cut at the first stop string.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/openai/openai_errors.h"
#include "server/openai/openai_models.h"
#include "server/openai/openai_request.h"
#include "server/server_api.h"

namespace inflight::server::http {
class HttpExchange;
}

namespace inflight::server::openai {

// What one response of the model added: its text and the log-prob of each token it generated.
struct GenerationPiece {
  std::string text;
  std::vector<float> token_logprobs;
};

// Receives a generation's results, in order, on the client connection's io strand.
class GenerationObserver {
 public:
  virtual ~GenerationObserver() = default;
  virtual void OnPiece(GenerationPiece piece) = 0;
  // finish_reason: "stop" (end of sequence or a stop string) or "length" (max_tokens reached).
  virtual void OnFinish(const std::string& finish_reason, std::int64_t completion_tokens) = 0;
  virtual void OnError(const OpenAiError& error) = 0;
};

// The ensemble request for `prompt`. `stream` asks the ensemble for one response per step (needed
// for per-token log-probs even when the client does not stream).
InferRequest BuildEnsembleRequest(const OpenAiModel& model, const std::string& prompt,
                                  const GenerationSettings& settings, std::int64_t max_tokens,
                                  bool stream);

// Queues `request` with the core. Returns an error when the core refuses it at once (unknown
// model, full queue); otherwise the observer hears the rest. A client that leaves cancels the
// request; so does a stop string found in the text.
std::optional<OpenAiError> RunGeneration(Server& server, InferRequest request,
                                         std::int64_t max_tokens, std::vector<std::string> stop,
                                         const std::shared_ptr<http::HttpExchange>& exchange,
                                         std::shared_ptr<GenerationObserver> observer);

// max_tokens when the client gave none: OpenAI's 16 for completions; for chat, what is left of the
// engine's max_seq_len after the prompt (16 when the engine's limit is not known).
std::int64_t DefaultMaxTokens(const OpenAiModel& model, bool chat, std::int64_t prompt_tokens);

}  // namespace inflight::server::openai

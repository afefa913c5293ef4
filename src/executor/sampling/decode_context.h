// What the sampler needs to know about one sequence at one step, besides its logits and config.
// Views only: the executor owns the token vectors and must keep them alive during the call.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "inflight/executor.h"
#include "inflight/types.h"

namespace inflight::sampling {

struct DecodeContext {
  std::span<const TokenIdType> prompt;     // the request's input_token_ids
  std::span<const TokenIdType> generated;  // tokens generated so far; an end_id is never among them
  std::optional<TokenIdType> end_id;       // unset: no end token (min_tokens then bans nothing)
  std::span<const VecTokens> bad_words;    // each non-empty
  std::span<const float> embedding_bias;   // empty: none; else exactly vocab_size values
};

inline DecodeContext MakeDecodeContext(const Request& request,
                                       std::span<const TokenIdType> generated) {
  DecodeContext ctx;
  ctx.prompt = request.input_token_ids;
  ctx.generated = generated;
  ctx.end_id = request.end_id;
  ctx.bad_words = request.bad_words;
  if (request.embedding_bias) ctx.embedding_bias = *request.embedding_bias;
  return ctx;
}
// The context views `request`, so a temporary Request would dangle.
DecodeContext MakeDecodeContext(Request&&, std::span<const TokenIdType>) = delete;

}  // namespace inflight::sampling

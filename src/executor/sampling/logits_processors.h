// The stages that rewrite one sequence's logits row before top-k/top-p truncation. Each is a
// separate function with one rule so a GPU kernel can be checked against it stage by stage.
//
// ApplyLogitsProcessors runs them in TensorRT-LLM's order (its batchApplyPenalty kernel, then
// banBadWords):
//   embedding bias -> temperature -> repetition -> presence -> frequency -> min_tokens -> bad words
// NOTE: temperature comes before the additive penalties as in TensorRT-LLM (vLLM and HF apply the
// penalties first); the repetition penalty commutes with temperature since it only depends on the
// sign.
//
// A banned token gets -inf, so its probability is exactly 0 and it is never drawn.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "executor/sampling/decode_context.h"
#include "inflight/executor.h"
#include "inflight/types.h"

namespace inflight::sampling {

// logits[i] += bias[i]. Precondition: bias.size() == logits.size(), or bias is empty (no-op).
void ApplyEmbeddingBias(std::span<float> logits, std::span<const float> bias);

// logits[i] /= temperature. Precondition: temperature > 0.
void ApplyTemperature(std::span<float> logits, float temperature);

// For each distinct token of prompt ++ generated (HF and TensorRT-LLM semantics):
// logit > 0 -> logit / penalty, else logit * penalty. penalty 1 is a no-op. Ids outside the
// vocabulary are skipped.
void ApplyRepetitionPenalty(std::span<float> logits, std::span<const TokenIdType> prompt,
                            std::span<const TokenIdType> generated, float penalty);

// logit -= penalty once for each distinct token that occurs in `generated` (not the prompt).
void ApplyPresencePenalty(std::span<float> logits, std::span<const TokenIdType> generated,
                          float penalty);

// logit -= count * penalty, count = occurrences of the token in `generated` (not the prompt).
void ApplyFrequencyPenalty(std::span<float> logits, std::span<const TokenIdType> generated,
                           float penalty);

// Bans end_id while fewer than min_tokens tokens have been generated. No-op without an end_id.
void ApplyMinTokens(std::span<float> logits, SizeType num_generated, SizeType min_tokens,
                    std::optional<TokenIdType> end_id);

// Whether ApplyMinTokens bans end_id on a row of vocab_size logits.
bool MinTokensBansEndId(SizeType num_generated, SizeType min_tokens,
                        std::optional<TokenIdType> end_id, std::size_t vocab_size);

// Bans the last token of each bad word whose other tokens are exactly the end of prompt ++
// generated; a single-token bad word is always banned. NOTE: the prompt counts, as in
// TensorRT-LLM's banBadWords (it matches against output_ids, which begin with the prompt): a prompt
// ending in "New" and the bad word "New York" ban "York" at step 0.
void ApplyBadWords(std::span<float> logits, std::span<const VecTokens> bad_words,
                   std::span<const TokenIdType> prompt, std::span<const TokenIdType> generated);

// The ids ApplyBadWords bans on a row of vocab_size logits, in bad_words order (an id banned by
// two words appears twice). The device sampler gets these instead of the words.
std::vector<TokenIdType> BadWordBans(std::span<const VecTokens> bad_words,
                                     std::span<const TokenIdType> prompt,
                                     std::span<const TokenIdType> generated,
                                     std::size_t vocab_size);

// Every stage above with the values of `config` (unset or neutral values skip a stage). The
// temperature is skipped when it is unset, 1 or 0 (0 means greedy: argmax does not depend on it).
void ApplyLogitsProcessors(std::span<float> logits, const SamplingConfig& config,
                           const DecodeContext& ctx);

}  // namespace inflight::sampling

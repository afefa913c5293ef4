#include "executor/sampling/logits_processors.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <limits>
#include <vector>

#include "executor/sampling/token_match.h"

namespace inflight::sampling {
namespace {

constexpr float kBanned = -std::numeric_limits<float>::infinity();

bool InVocab(TokenIdType t, std::size_t vocab_size) {
  return t >= 0 && static_cast<std::size_t>(t) < vocab_size;
}

// Sorted copy of the in-vocabulary tokens: equal ids are adjacent, so counts need no vocab-sized
// table.
std::vector<TokenIdType> SortedInVocab(std::span<const TokenIdType> a,
                                       std::span<const TokenIdType> b, std::size_t vocab_size) {
  std::vector<TokenIdType> out;
  out.reserve(a.size() + b.size());
  for (TokenIdType t : a)
    if (InVocab(t, vocab_size)) out.push_back(t);
  for (TokenIdType t : b)
    if (InVocab(t, vocab_size)) out.push_back(t);
  std::sort(out.begin(), out.end());
  return out;
}

// Calls fn(token, count) once per distinct token of a sorted vector.
template <typename Fn>
void ForEachRun(const std::vector<TokenIdType>& sorted, Fn fn) {
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    fn(sorted[i], static_cast<SizeType>(j - i));
    i = j;
  }
}

}  // namespace

void ApplyEmbeddingBias(std::span<float> logits, std::span<const float> bias) {
  if (bias.empty()) return;
  assert(bias.size() == logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] += bias[i];
}

void ApplyTemperature(std::span<float> logits, float temperature) {
  assert(temperature > 0.0f);
  for (float& l : logits) l /= temperature;
}

void ApplyRepetitionPenalty(std::span<float> logits, std::span<const TokenIdType> prompt,
                            std::span<const TokenIdType> generated, float penalty) {
  if (penalty == 1.0f) return;
  ForEachRun(SortedInVocab(prompt, generated, logits.size()), [&](TokenIdType t, SizeType) {
    float& l = logits[static_cast<std::size_t>(t)];
    l = l > 0.0f ? l / penalty : l * penalty;
  });
}

void ApplyPresencePenalty(std::span<float> logits, std::span<const TokenIdType> generated,
                          float penalty) {
  if (penalty == 0.0f) return;
  ForEachRun(SortedInVocab(generated, {}, logits.size()),
             [&](TokenIdType t, SizeType) { logits[static_cast<std::size_t>(t)] -= penalty; });
}

void ApplyFrequencyPenalty(std::span<float> logits, std::span<const TokenIdType> generated,
                           float penalty) {
  if (penalty == 0.0f) return;
  ForEachRun(SortedInVocab(generated, {}, logits.size()), [&](TokenIdType t, SizeType count) {
    logits[static_cast<std::size_t>(t)] -= static_cast<float>(count) * penalty;
  });
}

bool MinTokensBansEndId(SizeType num_generated, SizeType min_tokens,
                        std::optional<TokenIdType> end_id, std::size_t vocab_size) {
  return end_id && num_generated < min_tokens && InVocab(*end_id, vocab_size);
}

void ApplyMinTokens(std::span<float> logits, SizeType num_generated, SizeType min_tokens,
                    std::optional<TokenIdType> end_id) {
  if (MinTokensBansEndId(num_generated, min_tokens, end_id, logits.size()))
    logits[static_cast<std::size_t>(*end_id)] = kBanned;
}

std::vector<TokenIdType> BadWordBans(std::span<const VecTokens> bad_words,
                                     std::span<const TokenIdType> prompt,
                                     std::span<const TokenIdType> generated,
                                     std::size_t vocab_size) {
  std::vector<TokenIdType> banned;
  for (const VecTokens& word : bad_words) {
    if (word.empty() || !InVocab(word.back(), vocab_size)) continue;
    const std::span<const TokenIdType> prefix(word.data(), word.size() - 1);
    if (EndsWith(prompt, generated, prefix)) banned.push_back(word.back());
  }
  return banned;
}

void ApplyBadWords(std::span<float> logits, std::span<const VecTokens> bad_words,
                   std::span<const TokenIdType> prompt, std::span<const TokenIdType> generated) {
  for (TokenIdType t : BadWordBans(bad_words, prompt, generated, logits.size()))
    logits[static_cast<std::size_t>(t)] = kBanned;
}

void ApplyLogitsProcessors(std::span<float> logits, const SamplingConfig& config,
                           const DecodeContext& ctx) {
  ApplyEmbeddingBias(logits, ctx.embedding_bias);
  const float temperature = config.temperature.value_or(1.0f);
  if (temperature > 0.0f && temperature != 1.0f) ApplyTemperature(logits, temperature);
  ApplyRepetitionPenalty(logits, ctx.prompt, ctx.generated,
                         config.repetition_penalty.value_or(1.0f));
  ApplyPresencePenalty(logits, ctx.generated, config.presence_penalty.value_or(0.0f));
  ApplyFrequencyPenalty(logits, ctx.generated, config.frequency_penalty.value_or(0.0f));
  ApplyMinTokens(logits, static_cast<SizeType>(ctx.generated.size()), config.min_tokens.value_or(0),
                 ctx.end_id);
  ApplyBadWords(logits, ctx.bad_words, ctx.prompt, ctx.generated);
}

}  // namespace inflight::sampling

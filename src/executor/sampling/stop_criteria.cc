#include "executor/sampling/stop_criteria.h"

#include <algorithm>
#include <cstddef>

#include "executor/sampling/token_match.h"

namespace inflight::sampling {
namespace {

bool EndsWithStopWord(std::span<const TokenIdType> head, std::span<const TokenIdType> tail,
                      std::span<const VecTokens> stop_words) {
  for (const VecTokens& word : stop_words) {
    if (!word.empty() && EndsWith(head, tail, word)) return true;
  }
  return false;
}

}  // namespace

StopCriteria MakeStopCriteria(const Request& request) {
  StopCriteria c;
  c.end_id = request.end_id;
  c.stop_words = request.stop_words;
  c.max_tokens = request.max_tokens;
  c.min_tokens = request.sampling_config.min_tokens.value_or(0);
  return c;
}

bool EndsWithStopWord(std::span<const TokenIdType> generated,
                      std::span<const VecTokens> stop_words) {
  return EndsWithStopWord(generated, {}, stop_words);
}

StepOutcome EvaluateStep(TokenIdType token, std::span<const TokenIdType> generated,
                         const StopCriteria& criteria) {
  StepOutcome out;
  if (criteria.end_id && token == *criteria.end_id) {
    out.append_token = false;
    out.finish_reason = FinishReason::kEndId;
    return out;
  }
  const std::size_t num_generated = generated.size() + 1;
  const std::span<const TokenIdType> just_sampled(&token, 1);
  if (num_generated >= static_cast<std::size_t>(std::max<SizeType>(criteria.min_tokens, 0)) &&
      EndsWithStopWord(generated, just_sampled, criteria.stop_words)) {
    out.finish_reason = FinishReason::kStopWords;
  } else if (num_generated >=
             static_cast<std::size_t>(std::max<SizeType>(criteria.max_tokens, 0))) {
    out.finish_reason = FinishReason::kLength;
  }
  return out;
}

}  // namespace inflight::sampling

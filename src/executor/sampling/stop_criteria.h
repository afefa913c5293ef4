// What happens to a sequence after a token was sampled: is the token kept, and is the sequence
// done.
//
// Rules, checked in this order (the first that applies gives the finish reason):
//   1. end_id: the token is NOT appended and the sequence finishes with kEndId.
//      NOTE: as TensorRT-LLM, whose sampling kernels (samplingTopKKernels.cu,
//      samplingTopPKernels.cu) leave sequence_length unchanged when the sampled id equals end_id
//      ("Seq len should always contain only tokens to be outputted"): output_ids and
//      sequence_length exclude the end id.
//   2. stop words: the token is appended; if the generated tokens (never the prompt) now end with a
//      stop word, possibly spanning several steps' tokens, the sequence finishes with kStopWords.
//      The stop word stays in the output, as in NVIDIA's backend. Not checked while fewer than
//      min_tokens tokens have been generated.
//   3. length: the token is appended; max_tokens generated tokens finish it with kLength.
#pragma once

#include <optional>
#include <span>

#include "inflight/executor.h"
#include "inflight/types.h"

namespace inflight::sampling {

struct StopCriteria {
  std::optional<TokenIdType> end_id;
  std::span<const VecTokens> stop_words;
  SizeType max_tokens = 0;  // generated tokens allowed (Request::max_tokens)
  SizeType min_tokens = 0;  // stop words are ignored before this many generated tokens
};

// Views into `request`, which must outlive the result (hence no temporaries).
StopCriteria MakeStopCriteria(const Request& request);
StopCriteria MakeStopCriteria(Request&&) = delete;

struct StepOutcome {
  bool append_token = true;
  FinishReason finish_reason = FinishReason::kNotFinished;
};

// `generated` holds the tokens generated before `token` (no end id among them).
StepOutcome EvaluateStep(TokenIdType token, std::span<const TokenIdType> generated,
                         const StopCriteria& criteria);

// True when `generated` ends with one of `stop_words` (empty stop words never match).
bool EndsWithStopWord(std::span<const TokenIdType> generated,
                      std::span<const VecTokens> stop_words);

}  // namespace inflight::sampling

// Streamed responses of the LLM model that never end inside a character: each response carries
// only ids whose bytes end on a settled cut (tokenizer/token_boundary.h says why this lives here
// and not in the postprocessing model), so that NVIDIA's ensemble, which decodes each streamed
// response alone, gives the same text as a non-streamed request.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/llm_params.h"
#include "inflight/executor.h"
#include "tokenizer/token_boundary.h"
#include "tokenizer/tokenizer.h"

namespace inflight::backend {

// The tokenizer whose characters streamed responses keep whole: the tensorrt_llm model's own
// tokenizer_dir parameter, else the tokenizer_dir of the postprocessing model beside it in the
// repository (`repository_path` is the model's folder), else none (nullptr: ids are sent as they
// come, as NVIDIA's backend does). A tokenizer_dir of this model's that cannot be loaded is an
// error; one of the postprocessing model's is a warning (that model's own load reports it).
Result<std::unique_ptr<tokenizer::Tokenizer>> LoadStreamTokenizer(
    const config::LlmParams& params, const std::string& repository_path);

// One streamed row (beam width 1: each response holds only the new tokens).
class StreamHoldback {
 public:
  explicit StreamHoldback(const tokenizer::Tokenizer& tokenizer) : boundary_(tokenizer) {}

  // Rewrites `result` in place: the ids held from earlier responses go first, and the ids after the
  // last settled cut are held (with their output_log_probs and generation_logits) unless the
  // response is final, which carries everything. Returns false when a non-final response has
  // nothing left to send. A response of several beams is left as it is.
  bool Apply(ResponseResult& result);

 private:
  tokenizer::TokenBoundary boundary_;
  std::vector<std::int32_t> held_ids_;
  std::vector<float> held_log_probs_;          // one per held id, when the request returns them
  std::vector<float> held_generation_logits_;  // vocab_size per held id, when returned
};

}  // namespace inflight::backend

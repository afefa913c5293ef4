// SamplingConfig's member functions (declared in include/inflight/executor.h).
#include <cmath>
#include <string>

#include "executor/sampling/format_number.h"
#include "inflight/executor.h"

namespace inflight {
namespace {

using sampling::FormatNumber;

Status OutOfRange(const char* field, double value, const char* accepted) {
  return InvalidArgument(std::string(field) + " " + FormatNumber(value) +
                         " is out of range: accepted " + accepted);
}

}  // namespace

// "Set" means set to a value that does something: top_k 0 and top_p <= 0 are "off", as documented.
// NOTE: with neither top_k nor top_p on, the request is greedy whatever its temperature, as in
// TensorRT-LLM, whose sampling set-up turns top_k 0 with top_p 0 into top-k 1 (setupTopKRuntimeArgs
// in cpp/tensorrt_llm/kernels/samplingTopKKernels.cu, from FasterTransformer): NVIDIA's clients
// send temperature 1.0 with top_k 0 and top_p 0 and expect the greedy answer. A sample from the
// whole distribution asks for it with top_p 1 (the OpenAI routes do that for their default).
bool SamplingConfig::IsGreedy() const {
  if (top_k && *top_k == 1) return true;
  if (temperature && *temperature == 0.0f) return true;
  const bool top_k_active = top_k && *top_k > 0;
  const bool top_p_active = top_p && *top_p > 0.0f;
  return !top_k_active && !top_p_active;
}

Status SamplingConfig::Validate() const {
  if (beam_width < 1) {
    return OutOfRange("beam_width", beam_width, "1 (beam search is not implemented yet)");
  }
  if (beam_width > 1) {
    return Unsupported("beam_width " + std::to_string(beam_width) +
                       " is not supported: beam search is not implemented yet (only beam_width 1)");
  }
  if (top_k && *top_k < 0) return OutOfRange("top_k", *top_k, "[0, vocab_size] (0: no limit)");
  // NaN fails every comparison, so each check is written to reject it.
  if (top_p && !(*top_p <= 1.0f)) return OutOfRange("top_p", *top_p, "(0, 1], or <= 0 for off");
  if (temperature && !(*temperature >= 0.0f && std::isfinite(*temperature))) {
    return OutOfRange("temperature", *temperature, "[0, inf) (0: greedy)");
  }
  if (repetition_penalty && !(*repetition_penalty > 0.0f && std::isfinite(*repetition_penalty))) {
    return OutOfRange("repetition_penalty", *repetition_penalty, "(0, inf) (1: off)");
  }
  if (presence_penalty && !std::isfinite(*presence_penalty)) {
    return OutOfRange("presence_penalty", *presence_penalty, "finite values (0: off)");
  }
  if (frequency_penalty && !std::isfinite(*frequency_penalty)) {
    return OutOfRange("frequency_penalty", *frequency_penalty, "finite values (0: off)");
  }
  if (min_tokens && *min_tokens < 0) return OutOfRange("min_tokens", *min_tokens, ">= 0");
  return Status::Ok();
}

}  // namespace inflight

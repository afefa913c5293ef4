#include "executor/sampling/decoding_validation.h"

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "executor/sampling/format_number.h"

namespace inflight::sampling {
namespace {

std::string TokenRange(std::int64_t vocab_size) {
  return "accepted [0, " + std::to_string(vocab_size) + ") (vocab_size " +
         std::to_string(vocab_size) + ")";
}

Status CheckTokenId(const std::string& field, TokenIdType id, std::int64_t vocab_size) {
  if (id >= 0 && id < vocab_size) return Status::Ok();
  return InvalidArgument(field + " " + std::to_string(id) +
                         " is out of range: " + TokenRange(vocab_size));
}

Status CheckWords(const char* field, const std::vector<VecTokens>& words, std::int64_t vocab_size) {
  for (std::size_t w = 0; w < words.size(); ++w) {
    const std::string name = std::string(field) + "[" + std::to_string(w) + "]";
    if (words[w].empty()) {
      return InvalidArgument(name + " is empty: accepted sequences of 1 or more token ids");
    }
    for (std::size_t t = 0; t < words[w].size(); ++t) {
      RETURN_IF_ERROR(CheckTokenId(name + "[" + std::to_string(t) + "]", words[w][t], vocab_size));
    }
  }
  return Status::Ok();
}

Status CheckEmbeddingBias(const std::vector<float>& bias, std::int64_t vocab_size) {
  if (static_cast<std::int64_t>(bias.size()) != vocab_size) {
    return InvalidArgument("embedding_bias has " + std::to_string(bias.size()) +
                           " values: expected vocab_size " + std::to_string(vocab_size));
  }
  for (std::size_t i = 0; i < bias.size(); ++i) {
    // -inf is allowed: it bans the token.
    if (std::isnan(bias[i]) || (std::isinf(bias[i]) && bias[i] > 0.0f)) {
      return InvalidArgument("embedding_bias[" + std::to_string(i) + "] " + FormatNumber(bias[i]) +
                             " is invalid: accepted finite values or -inf");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateDecodingInputs(const Request& request, std::int64_t vocab_size) {
  if (vocab_size <= 0) {
    return InvalidArgument("vocab_size " + std::to_string(vocab_size) +
                           " is invalid: must be >= 1");
  }
  const SamplingConfig& sc = request.sampling_config;
  RETURN_IF_ERROR(sc.Validate());
  if (request.num_return_sequences < 1) {
    return InvalidArgument("num_return_sequences " + std::to_string(request.num_return_sequences) +
                           " is out of range: accepted 1");
  }
  if (request.num_return_sequences > 1) {
    return Unsupported("num_return_sequences " + std::to_string(request.num_return_sequences) +
                       " is not supported: only num_return_sequences 1 is implemented");
  }
  if (sc.top_k && *sc.top_k > vocab_size) {
    return InvalidArgument("top_k " + std::to_string(*sc.top_k) +
                           " is out of range: accepted [0, " + std::to_string(vocab_size) +
                           "] (vocab_size " + std::to_string(vocab_size) + "; 0: no limit)");
  }
  if (request.end_id) RETURN_IF_ERROR(CheckTokenId("end_id", *request.end_id, vocab_size));
  if (request.pad_id) RETURN_IF_ERROR(CheckTokenId("pad_id", *request.pad_id, vocab_size));
  RETURN_IF_ERROR(CheckWords("stop_words", request.stop_words, vocab_size));
  RETURN_IF_ERROR(CheckWords("bad_words", request.bad_words, vocab_size));
  if (request.embedding_bias)
    RETURN_IF_ERROR(CheckEmbeddingBias(*request.embedding_bias, vocab_size));
  return Status::Ok();
}

}  // namespace inflight::sampling

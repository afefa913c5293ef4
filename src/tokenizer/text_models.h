// The work of the preprocessing (text → ids) and postprocessing (ids → text) models, with the
// tensor names and layouts of NVIDIA's tensorrtllm_backend models, on host tensors.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/host_tensor.h"
#include "tokenizer/tokenizer.h"

namespace inflight::tokenizer {

struct PreprocessOptions {
  bool add_special_tokens = true;
  // The first dimension of every tensor is the batch (the model's max_batch_size > 0). When
  // false, the request is one row and outputs have no batch dimension.
  bool batched = true;
};

// Outputs the preprocessing model can produce, in NVIDIA's order.
const std::vector<std::string>& PreprocessOutputNames();

// Inputs: QUERY BYTES (required; the first element of each row is the text), REQUEST_OUTPUT_LEN
// INT32 (required), optional BAD_WORDS_DICT / STOP_WORDS_DICT BYTES (each element holds
// comma-separated words), EMBEDDING_BIAS_WORDS BYTES + EMBEDDING_BIAS_WEIGHTS FP32, END_ID /
// PAD_ID INT32, DECODER_QUERY BYTES; other inputs are ignored. Returns the `requested` outputs in
// that order. Errors name the tensor, the value and what is accepted.
Result<std::vector<HostTensor>> Preprocess(const Tokenizer& tokenizer,
                                           const PreprocessOptions& options,
                                           const std::vector<HostTensor>& inputs,
                                           const std::vector<std::string>& requested);

struct PostprocessOptions {
  bool skip_special_tokens = true;
  bool batched = true;  // as PreprocessOptions::batched
};

// Inputs: TOKENS_BATCH INT32 [batch, beams, len] ([beams, len] unbatched) and optional
// SEQUENCE_LENGTH INT32 [batch, beams] (default: all of each beam). Ids < 0 are padding and
// skipped. Output OUTPUT BYTES [batch, beams]: the text of each beam.
Result<std::vector<HostTensor>> Postprocess(const Tokenizer& tokenizer,
                                            const PostprocessOptions& options,
                                            const std::vector<HostTensor>& inputs,
                                            const std::vector<std::string>& requested);

}  // namespace inflight::tokenizer

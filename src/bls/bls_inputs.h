// A tensorrt_llm_bls request, row by row: what the BLS model reads itself (the text, max_tokens,
// stream, words to tokenize) and what it hands on to the tensorrt_llm model under that model's
// input names (NVIDIA's BLS mapping: top_k -> runtime_top_k, top_p -> runtime_top_p, length_penalty
// -> len_penalty, stream -> streaming, the rest by the same name).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bls/bls_config.h"
#include "bls/raw_tensor.h"
#include "common/status.h"
#include "tokenizer/host_tensor.h"
#include "tokenizer/tokenizer.h"

namespace inflight::bls {

struct RowRequest {
  int64_t row = 0;  // index in the request's batch (the batch_index of its responses)
  std::string text;
  int32_t max_tokens = 0;
  bool stream = false;
  int32_t beam_width = 1;
  // Inputs of NVIDIA's preprocessing model for this row (QUERY, REQUEST_OUTPUT_LEN, words, ids).
  std::vector<tokenizer::HostTensor> preprocess_inputs;
  // Inputs for tensorrt_llm taken from the request as they are, renamed, shaped [1, ...].
  std::vector<RawTensor> forwarded;
};

// Splits a request's inputs into rows. Errors (text_input missing, max_tokens not > 0, a stream
// asked of a model that is not decoupled, draft-model speculative decoding, ...) name the input,
// the value and what is accepted.
Result<std::vector<RowRequest>> BuildRows(std::vector<RawTensor> inputs, const BlsConfig& config);

// The row's inputs for tensorrt_llm: its forwarded ones plus the tokenizer's (input_ids,
// input_lengths, request_output_len, end_id, pad_id, stop_words_list, bad_words_list,
// embedding_bias), computed as NVIDIA's preprocessing model computes them.
Result<std::vector<RawTensor>> LlmInputs(const tokenizer::Tokenizer& tokenizer,
                                         bool add_special_tokens, const RowRequest& row);

}  // namespace inflight::bls

// The calibration samples of inflight-build --calib_dataset FILE. TensorRT-LLM's quantize script
// takes a Hugging Face dataset name; here it is a local file, as `datasets` writes one with
// Dataset.to_json (JSON lines) or as a plain list:
//   - JSON lines (the first character '{'): each line an object with "input_ids" (token ids, used
//     as they are), else "text" (the Pile's field), else "article" (cnn_dailymail's, TensorRT-LLM's
//     default calibration set), tokenized with special tokens as transformers' tokenizer(...) does;
//   - a JSON array (the first character '['): of such objects, or of strings;
//   - anything else: plain text, one sample a non-empty line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inflight/status.h"
#include "inflight/types.h"

namespace inflight::model {

struct CalibrationDatasetOptions {
  std::string path;
  // tokenizer.json (or vocab.json + merges.txt) for text samples; loaded only when a sample is
  // text. Empty: text samples are an error.
  std::string tokenizer_dir;
  std::int64_t calib_size = 512;      // --calib_size: the first this many samples
  std::int64_t max_seq_length = 512;  // --calib_max_seq_length: longer samples are cut
  std::int64_t vocab_size = 0;        // ids must be in [0, vocab_size)
};

// The samples' token ids, each at most max_seq_length long; empty samples are skipped. Errors name
// the file, the record (line or index) and the field or value at fault; a file without samples is
// an error.
Result<std::vector<VecTokens>> ReadCalibrationDataset(const CalibrationDatasetOptions& options);

}  // namespace inflight::model

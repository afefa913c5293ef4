// The random engine inflight-bench-executor writes when it is given no --engine_dir: its flags
// (--preset, --dtype, --qformat, --group_size, --kv_cache_dtype, --max_batch_size,
// --max_num_tokens) and the engine, the one inflight-build would make from make_checkpoint's
// checkpoint of the preset, written straight from random weights (model/random_engine.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/flags.h"
#include "inflight/status.h"
#include "model/engine_config.h"

namespace inflight::bench {

struct RandomEngineOptions {
  std::string preset = "tiny";
  std::string dtype;              // default: the preset's
  std::string qformat;            // empty: float; else fp8 | int8_wo | int4_wo (inflight-build's)
  std::int64_t group_size = 128;  // int4_wo: input columns per scale
  bool kv_cache_fp8 = false;      // --kv_cache_dtype fp8
  std::int64_t max_batch_size = 256;
  std::int64_t max_num_tokens = 8192;
};

void AddRandomEngineFlags(tools::FlagSet* flags, RandomEngineOptions* options);

// With --engine_dir the engine has its own dtype and quantization: the flags that would choose
// them are refused by name rather than ignored.
Status CheckEngineDirFlags(const tools::FlagSet& flags);

// Writes the engine into <work>/engine, sized for prompts up to max_input_len and sequences up to
// max_seq_len, and prints a line with its size and write rate. Returns the engine folder.
Result<std::string> WriteRandomBenchEngine(const RandomEngineOptions& options,
                                           std::int32_t max_input_len, std::int32_t max_seq_len,
                                           const std::filesystem::path& work);

// The engine's quantization in words for the result headers: "none", "fp8 (E4M3 weights,
// per-channel scales; activations per token), FP8 KV cache", "int4_wo (group 128)", ...
std::string DescribeQuantization(const model::QuantConfig& quant);

}  // namespace inflight::bench

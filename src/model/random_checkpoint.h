// Random-weight Hugging Face checkpoints (config.json + safetensors + tokenizer files) for tests
// and benchmarks: the same bytes for the same options and seed on every machine.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "inflight/status.h"
#include "model/engine_config.h"

namespace inflight::model {

// Which config.json layout to write: transformers 4.x (rope_theta, rope_scaling, torch_dtype) or
// 5.x (rope_parameters, dtype, and layer_types for qwen2 / qwen3), as their save_pretrained does.
enum class ConfigLayout : std::uint8_t { kTransformers4, kTransformers5 };

struct RandomCheckpointOptions {
  std::string arch = "llama";  // llama | mistral | qwen2 | qwen3 | gpt2
  std::int64_t hidden_size = 64;
  std::int64_t num_layers = 2;
  std::int64_t num_heads = 4;
  std::int64_t num_kv_heads = 2;         // gpt2: must equal num_heads
  std::optional<std::int64_t> head_dim;  // default hidden_size / num_heads
  std::int64_t intermediate_size = 128;
  std::optional<std::int64_t> vocab_size;  // default: the tokenizer's, else 1000
  std::int64_t max_position_embeddings = 2048;
  // Not gpt2. type and theta, and the type's parameters; yarn's attention_factor is left for the
  // reader to derive, original_max_position_embeddings 0 writes none (max_position_embeddings).
  RopeConfig rope;
  ConfigLayout layout = ConfigLayout::kTransformers4;
  // mistral: sliding_window of every layer (unset: null, no window); qwen2 / qwen3: with it,
  // use_sliding_window is true and layers >= max_window_layers slide.
  std::optional<std::int64_t> sliding_window;
  std::optional<std::int64_t> max_window_layers;  // qwen2 / qwen3; default num_layers
  bool attention_bias = false;                    // llama, qwen3: biases on q, k, v and o_proj
  bool mlp_bias = false;                          // llama: biases on gate, up and down_proj
  std::optional<bool> tie_word_embeddings;        // default: gpt2 true, qwen2 true, others false
  DType dtype = DType::kFloat32;                  // float32 | float16 | bfloat16
  std::uint64_t seed = 0;
  double init_std = 0.02;
  std::int32_t shards = 1;                   // > 1 writes model-0000K-of-0000N + index.json
  std::string tokenizer_dir;                 // optional: tokenizer files copied from here
  std::optional<std::int32_t> bos_token_id;  // default: from the tokenizer, else per arch
  std::optional<std::int32_t> eos_token_id;
};

// "tiny" (hidden 64, 2 layers, 4/2 heads, intermediate 128), "small", "llama-3.1-8b" or
// "llama-3.1-70b" (their shapes, llama3 rope scaling, bfloat16). Sets the preset's fields only;
// later flags may override them.
Status ApplyCheckpointPreset(std::string_view preset, RandomCheckpointOptions* options);
Status ValidateCheckpointOptions(const RandomCheckpointOptions& options);
// The options as WriteRandomCheckpoint applies them: vocabulary size and bos/eos from the tokenizer
// folder when not set (vocabulary 1000 without either), validated, special ids inside the
// vocabulary.
Result<RandomCheckpointOptions> ResolveCheckpointOptions(RandomCheckpointOptions options);

// What a tokenizer folder offers: files to copy, the vocabulary size (largest id + 1) and bos/eos
// ids (from tokenizer_config.json's bos_token/eos_token, else "<|endoftext|>" when the vocabulary
// has it).
struct TokenizerInfo {
  std::vector<std::string> files;  // full paths of the tokenizer files present
  std::optional<std::int64_t> vocab_size;
  std::optional<std::int32_t> bos_token_id;
  std::optional<std::int32_t> eos_token_id;
};
Result<TokenizerInfo> ReadTokenizerInfo(const std::string& dir);

enum class InitKind : std::uint8_t { kWeight, kNormWeight, kBias };
struct HfTensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  InitKind init = InitKind::kWeight;
};
// The tensors Hugging Face's save_pretrained writes for this architecture, in order.
std::vector<HfTensorSpec> CheckpointTensors(const RandomCheckpointOptions& options);
// config.json as transformers' save_pretrained writes it for the architecture in options.layout
// (sorted keys).
std::string CheckpointConfigJson(const RandomCheckpointOptions& options);

// Fills `n` elements of `dtype` for tensor `name`; deterministic in (seed, name, init, std) and
// independent of thread count. Uses up to `num_threads` threads (0: hardware concurrency, capped at
// 16).
void FillRandomTensor(std::uint64_t seed, std::string_view name, InitKind init, double init_std,
                      DType dtype, std::byte* dst, std::size_t n, unsigned num_threads = 0);

struct CheckpointSummary {
  std::vector<std::string> files;  // everything written
  std::int64_t num_tensors = 0;
  std::uint64_t num_bytes = 0;
  std::int64_t vocab_size = 0;
};
// Called after each tensor is written.
using CheckpointProgressFn = std::function<void(
    const std::string& tensor, std::int64_t tensors_done, std::int64_t tensors_total,
    std::uint64_t bytes_done, std::uint64_t bytes_total)>;

// Writes the checkpoint into `output_dir` (created if missing), a few tensors generated and written
// at once.
Result<CheckpointSummary> WriteRandomCheckpoint(RandomCheckpointOptions options,
                                                const std::string& output_dir,
                                                const CheckpointProgressFn& progress = nullptr);

}  // namespace inflight::model

// Settings of the LLM model (the tensorrt_llm model of the repository), read from its ModelConfig.
// Keys, defaults and accepted values follow NVIDIA's tensorrtllm_backend template
// (all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt), plus our own `device`.
// An absent, empty or unfilled ("${...}") parameter takes the default written next to its field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model_config.pb.h"

namespace inflight::config {

// gpt_model_type: "V1"/"v1" -> kV1 (static batching); "inflight_batching" and
// "inflight_fused_batching" -> kInflightFusedBatching.
enum class BatchingType { kV1, kInflightFusedBatching };

// batch_scheduler_policy.
enum class SchedulerPolicy { kMaxUtilization, kGuaranteedNoEvict };

// decoding_mode; kAuto lets the executor pick (top-k/top-p sampling, beam search if beams > 1).
enum class DecodingMode {
  kAuto,
  kTopK,
  kTopP,
  kTopKTopP,
  kBeamSearch,
  kMedusa,
  kRedrafter,
  kLookahead,
  kEagle,
};

// device (ours): where the model runs. kAuto = CUDA when a device is visible, else CPU.
enum class Device { kAuto, kCuda, kCpu };

struct LlmParams {
  // ---- Model-level settings (from ModelConfig fields, not parameters) ----
  std::string model_name;
  // model_transaction_policy.decoupled. Streaming and batch > 1 need it.
  bool decoupled = false;
  // max_batch_size; 0 = the model does not batch.
  int32_t max_batch_size = 0;
  // dynamic_batching.default_queue_policy.max_queue_size; 0 = unlimited.
  uint32_t max_queue_size = 0;
  // dynamic_batching.max_queue_delay_microseconds.
  uint64_t max_queue_delay_microseconds = 0;

  // ---- Parameters (key = field name unless noted); default, then accepted range ----
  BatchingType batching_type =
      BatchingType::kInflightFusedBatching;             // key gpt_model_type; required
  int32_t max_beam_width = 1;                           // >= 1
  std::string gpt_model_path;                           // engine dir; "" = none
  std::string encoder_model_path;                       // "" = none; not both empty
  std::optional<int64_t> max_tokens_in_paged_kv_cache;  // unset = from memory fraction; > 0
  std::optional<std::vector<int32_t>> max_attention_window_size;  // csv; unset = max seq len; > 0
  std::optional<int32_t> sink_token_length;                       // >= 0
  SchedulerPolicy batch_scheduler_policy = SchedulerPolicy::kGuaranteedNoEvict;
  double kv_cache_free_gpu_mem_fraction = 0.9;    // (0, 1]
  std::optional<double> cross_kv_cache_fraction;  // (0, 1)
  int64_t kv_cache_host_memory_bytes = 0;         // >= 0; host offload pool
  bool kv_cache_onboard_blocks = true;
  bool enable_trt_overlap = false;  // accepted, ignored (TensorRT only)
  bool exclude_input_in_output = false;
  int64_t cancellation_check_period_ms = 100;  // >= 1
  int64_t stats_check_period_ms = 100;         // >= 1
  int64_t iter_stats_max_iterations = 1000;    // >= 0
  int64_t request_stats_max_iterations = 0;    // >= 0
  bool enable_kv_cache_reuse = true;
  bool normalize_log_probs = true;
  bool enable_chunked_context = false;
  std::optional<std::vector<std::vector<int32_t>>> gpu_device_ids;   // "0,1;2,3"; unset = all
  std::optional<std::vector<std::vector<int32_t>>> participant_ids;  // same syntax
  std::optional<int32_t> num_nodes;  // >= 1; unset: not checked (leader mode: MPI's hosts)
  int32_t lora_cache_optimal_adapter_size = 8;              // >= 1
  int32_t lora_cache_max_adapter_size = 64;                 // >= 1
  double lora_cache_gpu_memory_fraction = 0.05;             // (0, 1]
  int64_t lora_cache_host_memory_bytes = int64_t{1} << 30;  // >= 0
  std::string lora_prefetch_dir;                            // "" = none
  DecodingMode decoding_mode = DecodingMode::kAuto;
  std::string executor_worker_path;                        // "" = beside the backend library
  std::optional<int32_t> lookahead_window_size;            // >= 1; iff decoding_mode lookahead
  std::optional<int32_t> lookahead_ngram_size;             // >= 1; iff decoding_mode lookahead
  std::optional<int32_t> lookahead_verification_set_size;  // >= 1; iff decoding_mode lookahead
  std::optional<std::vector<std::vector<int32_t>>> medusa_choices;  // "{0,0,0},{0,1}"
  std::optional<std::vector<std::vector<int32_t>>> eagle_choices;   // same syntax
  double gpu_weights_percent = 1.0;                                 // [0, 1]
  bool enable_context_fmha_fp32_acc = false;
  bool multi_block_mode = true;
  bool cuda_graph_mode = false;
  int32_t cuda_graph_cache_size = 0;  // >= 0
  bool speculative_decoding_fast_logits = false;
  std::string tokenizer_dir;            // ignored by the LLM model
  std::string guided_decoding_backend;  // "" = off, or "xgrammar"
  std::string xgrammar_tokenizer_info_path;
  int32_t recv_poll_period_ms = 0;            // >= 0; not in the template
  bool force_cpu_only_input_tensors = false;  // key FORCE_CPU_ONLY_INPUT_TENSORS
  Device device = Device::kAuto;              // ours: auto | cuda | cpu
  std::optional<bool> busy_poll;              // ours: auto (unset) | true | false
  // Ours, for a gpt_model_path that names a Hugging Face checkpoint folder (converted at load,
  // docs/hf_config.md): where converted engines are kept ("" = none: a temporary engine per
  // load), and inflight-build's options for the conversion ("" / unset = its defaults: the
  // checkpoint's dtype, max_seq_len min(max_position_embeddings, 2048), max_input_len
  // min(1024, max_seq_len), max_num_tokens 8192, tokens_per_block 64). max_batch_size is the
  // model's.
  std::string engine_cache_dir;
  std::string build_dtype;                        // "" | float32 | float16 | bfloat16
  std::optional<int32_t> build_max_input_len;     // >= 1
  std::optional<int32_t> build_max_seq_len;       // >= 1
  std::optional<int32_t> build_max_num_tokens;    // >= 1
  std::optional<int32_t> build_tokens_per_block;  // a power of two in [1, 1024]

  // Reads every parameter through one table (llm_params.cc), then checks the rules that join
  // several keys. An unknown parameter key is ignored with one warning naming the nearest known
  // key (unknown_parameters.h).
  static Result<LlmParams> FromModelConfig(const inference::ModelConfig& config);

  // Refuses, by name, a parameter set to a value that asks for a feature this engine does not have
  // (encoder-decoder models, LoRA, speculative or guided decoding, weight streaming...). The model
  // loader calls it after FromModelConfig, which only parses.
  Status CheckServed() const;

  // The parameter keys the table knows, in table order (for docs and tests).
  static std::vector<std::string> ParameterNames();
};

std::string_view BatchingTypeName(BatchingType type);
std::string_view SchedulerPolicyName(SchedulerPolicy policy);
std::string_view DecodingModeName(DecodingMode mode);
std::string_view DeviceName(Device device);

}  // namespace inflight::config
